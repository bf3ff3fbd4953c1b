"""Snowflake's error texts, as the classifier's signatures match them (`signatures.py`).

Written from Snowflake's documented messages, which dbt-snowflake reports after the error code
and SQLSTATE (`000904 (42000): SQL compilation error: error line 3 at position 4` / `invalid
identifier 'AMONT'`):

- the SQL names what is not there: `invalid identifier 'X'` (a column; `'O.X'` qualified), a
  `syntax error line L at position P unexpected 'form'`: code;
- `Object 'DB.S.T' does not exist or not authorized.`: a missing relation, read as DuckDB's and
  Postgres's are (a project relation near the name: code; else the environment lacks it);
- `Numeric value 'abc' is not recognized` (and a date or timestamp `... is not recognized`): a
  value that does not fit its type, the data's fault unless the SQL that makes it changed;
- `Warehouse 'WH' cannot be resumed because resource monitor 'RM' has exceeded its quota`, `No
  active warehouse selected in the current session`: the platform, not the code;
- `Insufficient privileges to operate on schema 'S'`, `SQL access control error:`: grants;
- `Incorrect username or password was specified.`: credentials.

The local emulator the tests run on (fakesnow) reports DuckDB's words under Snowflake's codes
(`002043 (02000): Binder Error: Referenced column "AMONT" not found in FROM clause!`, `002003
(42S02): Catalog Error: Table with name X does not exist!`): the DuckDB signatures match those.
SQL it cannot parse fails in its parser's words (sqlglot's) under Snowflake's syntax error
code: `001003 (42000): Expecting ). Line 2, Col: 7.` (`SF_EMULATOR_PARSE`).
"""

from __future__ import annotations

# Alternations, each one regex group, spliced into the signatures' patterns
SF_SQL = (
    r"(invalid identifier '[^'\n]+'|syntax error line \d+ at position \d+"
    r"|is not a valid group by expression|ambiguous column name '[^'\n]+')"
)
# the emulator's parser (sqlglot) under Snowflake's syntax error code: no token named
SF_EMULATOR_PARSE = (
    r"(001003 \(42000\): (?:Expecting [^\n]{1,40}?|Invalid expression / Unexpected token"
    r"|Required keyword: '[^'\n]+' missing[^\n]*?)\. Line \d+, Col: \d+\.)"
)
SF_MISSING_RELATION = r"Object '([^'\n]+)' does not exist or not authorized"
SF_CONVERSION = r"(?:Numeric value|Date|Timestamp|Boolean value) '[^'\n]*' is not recognized"
SF_WAREHOUSE = (
    r"(Warehouse '[^'\n]+' cannot be resumed|No active warehouse selected"
    r"|Warehouse '[^'\n]+' (?:does not exist or not authorized|is suspended))"
)
SF_PRIVILEGES = r"Insufficient privileges|SQL access control error"
SF_AUTH = r"Incorrect username or password was specified"

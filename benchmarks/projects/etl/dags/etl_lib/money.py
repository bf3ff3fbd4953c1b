"""Money maths for invoices: cents in, euros out, rounded the way finance reports them."""

from __future__ import annotations


def parse_invoice(row: dict[str, str]) -> dict[str, object]:
    """A landing row with typed amounts; `amount_cents` is the gross (net plus tax)."""
    net = int(row["net_cents"])
    tax = int(row["tax_cents"])
    return {
        "invoice_id": int(row["invoice_id"]),
        "customer": row["customer"],
        "country": row["country"],
        "currency": row["currency"],
        "amount_cents": net + tax,
        "tax_cents": tax,
        "issued_on": row["issued_on"],
    }


def to_eur(cents: int, currency: str, rates: dict[str, float]) -> float:
    """Convert an amount in cents of `currency` to euros, two decimals."""
    return round(cents / 100.0 * rates[currency], 2)


def totals_by_country(
    invoices: list[dict[str, object]], rates: dict[str, float], currency: str = "EUR"
) -> dict[str, float]:
    """Gross invoiced amount per country, in `currency` (only EUR is supported)."""
    if currency != "EUR":
        raise ValueError(f"unsupported reporting currency {currency!r}")
    totals: dict[str, float] = {}
    for invoice in invoices:
        amount = to_eur(int(invoice["amount_cents"]), str(invoice["currency"]), rates)
        country = str(invoice["country"])
        totals[country] = round(totals.get(country, 0.0) + amount, 2)
    return totals

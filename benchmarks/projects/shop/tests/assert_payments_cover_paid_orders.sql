-- A completed or shipped order is paid in full: its payments add up to its total.
select order_id, order_total, amount
from {{ ref('orders') }}
where status in ('completed', 'shipped')
  and amount <> order_total

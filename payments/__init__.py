"""Sample app: payments recorded once per pay number, paying an order from an account."""

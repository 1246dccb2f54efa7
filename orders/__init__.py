"""Sample app: orders created once per request id, moved through a status table."""

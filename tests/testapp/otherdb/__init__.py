"""A database backend of a vendor DatabaseStore has no SQL for (the system check's tests)."""

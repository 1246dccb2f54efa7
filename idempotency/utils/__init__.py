"""What the stores and the engine stand on (the bottom layer): plugin loading, keyed hashes,
outages and store errors, backoff, the hot-path JSON codec, redis-py clients, and bytes in
a Django cache that are never unpickled."""

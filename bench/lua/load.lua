-- wrk script of the benchmark: POSTs the bench body with a token and an Idempotency-Key.
--   wrk ... -s load.lua URL -- <mode> <token> <key>
-- mode "unique": a new key per request (<key>-<thread>-<n>): the first-request path.
-- mode "fixed":  <key> on every request (primed beforehand): the replay path.
-- Each thread counts response statuses and sums the server's X-Bench-SQL header;
-- done() prints one line "BENCH_JSON {...}" that the orchestrator parses.

local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("id", #threads)
end

local mode, prefix, headers, fixed
local body = '{"amount": 1, "memo": "bench"}'
local counter = 0
statuses = {}
sql = 0
counted = 0

function init(args)
  mode = args[1]
  headers = {
    ["Content-Type"] = "application/json",
    ["Authorization"] = "Token " .. args[2],
  }
  prefix = args[3]
  if mode == "fixed" then
    headers["Idempotency-Key"] = prefix
    fixed = wrk.format("POST", nil, headers, body)
  end
end

function request()
  if fixed then
    return fixed
  end
  counter = counter + 1
  headers["Idempotency-Key"] = prefix .. "-" .. id .. "-" .. counter
  return wrk.format("POST", nil, headers, body)
end

function response(status, hdrs, _)
  statuses[status] = (statuses[status] or 0) + 1
  local n = tonumber(hdrs["X-Bench-SQL"])
  if n then
    sql = sql + n
    counted = counted + 1
  end
end

function done(summary, latency, _)
  local merged, total_sql, total_counted = {}, 0, 0
  for _, thread in ipairs(threads) do
    for code, n in pairs(thread:get("statuses")) do
      merged[code] = (merged[code] or 0) + n
    end
    total_sql = total_sql + thread:get("sql")
    total_counted = total_counted + thread:get("counted")
  end
  local parts = {}
  for code, n in pairs(merged) do
    table.insert(parts, string.format('"%d": %d', code, n))
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests": %d, "duration_us": %d, "p50_us": %d, "p90_us": %d, '
      .. '"p99_us": %d, "max_us": %d, "mean_us": %.1f, "sql": %d, "sql_counted": %d, '
      .. '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, '
      .. '"statuses": {%s}}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max, latency.mean, total_sql, total_counted,
    e.connect, e.read, e.write, e.status, e.timeout, table.concat(parts, ", ")))
end

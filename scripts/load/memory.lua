-- wrk script for `scripts/load-test.sh`: searches and adds against the
-- memory API of 64 users. MODE (env): search | add | mixed (90/10).
local mode = os.getenv("MODE") or "mixed"
local token = os.getenv("TOKEN")
local users = 64
local words = { "cat", "jazz", "flight", "seat", "peanut", "allergy", "saxophone", "garden",
  "lisbon", "coffee", "marathon", "python", "birthday", "sister", "guitar", "vegan",
  "hiking", "museum", "window", "aisle", "dentist", "piano", "tennis", "recipe" }
local counter = 0
local headers = { ["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json" }

local function word(i) return words[(i % #words) + 1] end

request = function()
  counter = counter + 1
  local path = "/v1/apps/load/users/u" .. (counter % users) .. "/memory/"
  if mode == "add" or (mode == "mixed" and counter % 10 == 0) then
    local body = string.format('{"content":"load note %d about %s and %s"}', counter, word(counter), word(counter * 7))
    return wrk.format("POST", path .. "entries", headers, body)
  end
  local body = string.format('{"query":"%s %s","limit":10}', word(counter * 3), word(counter * 5))
  return wrk.format("POST", path .. "search", headers, body)
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"mode":"%s","requests":%d,"seconds":%.1f,"requests_per_s":%.0f,"p50_ms":%.3f,"p99_ms":%.3f,"socket_errors":%d,"non_2xx":%d}\n',
    mode, summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    e.connect + e.read + e.write + e.timeout, e.status))
end

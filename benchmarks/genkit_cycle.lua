-- wrk script for benchmarks/server.py's [S5]: full approval cycles over the Genkit agent wire.
--
--   wrk -t1 -c8 -d5s -s benchmarks/genkit_cycle.lua URL -- PATH [TOKEN]
--
-- The same script drives the reference's genkit-fastapi server (PATH /bankingAgent, no token) and
-- pausepoint's agent endpoint (PATH /agents/bankingAgent, a bearer token). A cycle is two
-- non-streamed requests: POST {"data": {"message": ...}} (the transfer pauses for userApproval;
-- the reply's "result" names the paused call's ref and the snapshot), then POST
-- {"data": {"resume": {"respond": [approved]}}, "init": {"snapshotId": ...}} (the tool runs, the
-- model answers; the reply must finish "stop" with the transfer in its text). As in cycle.lua, a
-- reply that pauses queues its resume and a later request takes it, so a session's two turns
-- travel on two connections. No approval is sent twice: the reference would run the tool again
-- (it branches from any snapshot), so the cycle here is the one both servers answer alike.
local threads = {}
function setup(thread) table.insert(threads, thread) end

local path = "/bankingAgent"
local headers = {["Content-Type"] = "application/json"}
local send_body = '{"data":{"message":{"role":"user","content":[{"text":"Transfer $5 to bob."}]}}}'
local queue = {}
cycles, failures, paused, last_error = 0, 0, 0, ""

function init(args)
  if args[1] then path = args[1] end
  if args[2] then headers["Authorization"] = "Bearer " .. args[2] end
end

local function resume_body(item)
  return '{"data":{"resume":{"respond":[{"toolResponse":{"ref":"' .. item.ref .. '","name":"' .. item.name
    .. '","output":{"approved":true}}}]}},"init":{"snapshotId":"' .. item.snapshot .. '"}}'
end

function request()
  -- The oldest queued resume, if another is queued behind it (see the header).
  local item = #queue > 1 and table.remove(queue, 1)
  if item then
    return wrk.format("POST", path, headers, resume_body(item))
  end
  return wrk.format("POST", path, headers, send_body)
end

local function fail(why)
  failures = failures + 1
  last_error = why
end

function response(status, hdrs, body)
  if status ~= 200 then
    return fail(tostring(status) .. " " .. body:sub(1, 200))
  end
  local finish = body:match('"finishReason":"(%a+)"')
  if finish == "interrupted" then
    -- The paused call's toolRequest: its ref and name come before its input on both servers,
    -- but search from the toolRequest on rather than rely on the key order.
    local at = body:find('"toolRequest":{', 1, true)
    local ref = at and body:match('"ref":"([^"]+)"', at)
    local name = at and body:match('"name":"([^"]+)"', at)
    local snapshot = body:match('"snapshotId":"([^"]+)"')
    if ref and name and snapshot then
      paused = paused + 1
      table.insert(queue, {ref = ref, name = name, snapshot = snapshot})
    else
      fail("a paused reply without its ref or snapshotId: " .. body:sub(1, 200))
    end
  elseif finish == "stop" and body:find("Transferred $5 to bob", 1, true) then
    cycles = cycles + 1
  else
    fail("unexpected reply: " .. body:sub(1, 200))
  end
end

function done(summary, latency, requests)
  local c, f, p, e = 0, 0, 0, ""
  for _, t in ipairs(threads) do
    c = c + t:get("cycles"); f = f + t:get("failures"); p = p + t:get("paused")
    if t:get("last_error") ~= "" then e = t:get("last_error") end
  end
  local errors = summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout
  io.write(string.format(
    "RESULT cycles=%d paused=%d failures=%d refused=0 crossed=0 requests=%d socket_errors=%d duration_us=%d p50_us=%d p99_us=%d\n",
    c, p, f, summary.requests, errors, summary.duration, latency:percentile(50), latency:percentile(99)))
  if e ~= "" then io.write("LAST_ERROR " .. e:gsub("\n", " ") .. "\n") end
end

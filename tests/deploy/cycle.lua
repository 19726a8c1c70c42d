-- wrk script for tests/deploy/bench.py: benchmarks/cycle.lua's approval cycle, through nginx or
-- straight to the servers.
--
-- A cycle is two requests: POST a message to a session named here (.../sessions/<id>/messages:
-- the transfer pauses for approval), then POST the approval of the pause it returned, on another
-- connection of this thread (the oldest queued approval is taken by the next request). Naming
-- the session puts its id in both paths, so nginx's access log shows which server took each.
-- Every session transfers to an account of its own, so the ledger counts transfers per session.
-- One cycle in DUP_EVERY sends its approval a second time once the first is answered: it must be
-- refused (409 already_resolved) and never transfer again.
--
-- PP_BENCH_TOKEN is the bearer token; PP_BENCH_RUN names this run's sessions and accounts;
-- PP_BENCH_DIRECT, a list of ports, sends wrk's thread N straight to the Nth server (round the
-- list) instead of to the URL given.
local threads = {}
local run = os.getenv("PP_BENCH_RUN") or "run"
local direct = {}
for port in string.gmatch(os.getenv("PP_BENCH_DIRECT") or "", "%d+") do table.insert(direct, port) end

function setup(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
  if #direct > 0 then
    thread.addr = wrk.lookup("127.0.0.1", direct[(#threads - 1) % #direct + 1])[1]
  end
end

local queue = {}
local refs = {} -- session -> the ref of its pause, until its approval is answered
local token = os.getenv("PP_BENCH_TOKEN") or ""
local headers = {["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json"}
local approval = '{"output":{"approved":true}}'
local DUP_EVERY = 10
local started = 0
cycles, failures, refused, dups, last_error = 0, 0, 0, 0, ""

function request()
  local item = #queue > 1 and table.remove(queue, 1)
  if item then
    if item.dup then dups = dups + 1 end
    return wrk.format("POST", "/v1/agents/bankingAgent/sessions/" .. item.session .. "/interrupts/" .. item.ref ..
      "/respond", headers, approval)
  end
  started = started + 1
  local session = run .. "-" .. tid .. "-" .. started
  local message = '{"message":"Transfer $5 to b' .. run .. "x" .. tid .. "x" .. started .. '."}'
  return wrk.format("POST", "/v1/agents/bankingAgent/sessions/" .. session .. "/messages", headers, message)
end

function response(status, hdrs, body)
  if status == 409 and body:match('"code":"already_resolved"') then
    refused = refused + 1
    return
  end
  if status ~= 200 then
    failures = failures + 1
    last_error = tostring(status) .. " " .. body:sub(1, 200)
    return
  end
  local finish = body:match('"finish_reason":"(%a+)"')
  local session = body:match('"session_id":"([%w._:@-]+)"')
  if finish == "interrupted" then
    local ref = body:match('"interrupts":%[{[^}]-"ref":"([%w_-]+)"')
    if session and ref then
      refs[session] = ref
      table.insert(queue, {session = session, ref = ref})
    else
      failures = failures + 1
    end
  elseif finish == "stop" then
    cycles = cycles + 1
    local ref = session and refs[session]
    if ref then
      refs[session] = nil
      if cycles % DUP_EVERY == 0 then
        table.insert(queue, {session = session, ref = ref, dup = true})
      end
    end
  else
    failures = failures + 1
  end
end

function done(summary, latency, requests)
  local c, f, r, d, e = 0, 0, 0, 0, ""
  for _, t in ipairs(threads) do
    c = c + t:get("cycles"); f = f + t:get("failures"); r = r + t:get("refused"); d = d + t:get("dups")
    if t:get("last_error") ~= "" then e = t:get("last_error") end
  end
  local errors = summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout
  io.write(string.format(
    "RESULT cycles=%d failures=%d refused=%d dups=%d requests=%d socket_errors=%d duration_us=%d p50_us=%d p99_us=%d\n",
    c, f, r, d, summary.requests, errors, summary.duration, latency:percentile(50), latency:percentile(99)))
  if e ~= "" then io.write("LAST_ERROR " .. e:gsub("\n", " ") .. "\n") end
end

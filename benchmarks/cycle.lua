-- wrk script for benchmarks/server.py: full approval cycles through the REST API.
--
-- A cycle is two requests: POST a message (the transfer pauses for approval), then POST the
-- approval of the pause it returned (the tool runs, the model answers). A reply to a send queues
-- its approval; a later request on another connection of this thread takes it, so a session's
-- two turns travel on two connections (and, with several processes on one port, often to two).
-- One cycle in DUP_EVERY also sends its approval a second time once the first is answered:
-- the server must refuse it (the pause is resolved) and must not run the tool again.
local threads = {}
function setup(thread) table.insert(threads, thread) end

local queue = {}
local headers = {["Authorization"] = "Bearer bench-token", ["Content-Type"] = "application/json"}
local approval = '{"output":{"approved":true}}'
local DUP_EVERY = 10
cycles, failures, refused, crossed, paused, last_error = 0, 0, 0, 0, 0, ""

local function respond_path(item)
  return "/v1/agents/bankingAgent/sessions/" .. item.session .. "/interrupts/" .. item.ref .. "/respond"
end

function request()
  -- The oldest queued approval, if another is queued behind it: a connection that has just
  -- queued one does not take its own, so a session's two turns travel on two connections.
  local item = #queue > 1 and table.remove(queue, 1)
  if item then
    return wrk.format("POST", respond_path(item), headers, approval)
  end
  return wrk.format("POST", "/v1/agents/bankingAgent/sessions", headers, '{"message":"Transfer $5 to bob."}')
end

local pending = {} -- session -> {pid = the process that paused it, ref = its pause}

function response(status, hdrs, body)
  if status >= 400 and status < 500 and (body:match('"code":"already_resolved"') or body:match('"code":"not_paused"')) then
    refused = refused + 1
    return
  end
  if status ~= 200 then
    failures = failures + 1
    last_error = tostring(status) .. " " .. body:sub(1, 200)
    return
  end
  local finish = body:match('"finish_reason":"(%a+)"')
  local session = body:match('"session_id":"([%w_-]+)"')
  if finish == "interrupted" then
    local ref = body:match('"interrupts":%[{[^}]-"ref":"([%w_-]+)"')
    if session and ref then
      paused = paused + 1
      pending[session] = {pid = hdrs["x-bench-pid"], ref = ref}
      table.insert(queue, {session = session, ref = ref})
    else
      failures = failures + 1
    end
  elseif finish == "stop" then
    cycles = cycles + 1
    local first = session and pending[session]
    if first then
      pending[session] = nil
      if first.pid ~= hdrs["x-bench-pid"] then crossed = crossed + 1 end
      if cycles % DUP_EVERY == 0 then table.insert(queue, {session = session, ref = first.ref}) end
    end
  else
    failures = failures + 1
  end
end

function done(summary, latency, requests)
  local c, f, r, x, p, e = 0, 0, 0, 0, 0, ""
  for _, t in ipairs(threads) do
    c = c + t:get("cycles"); f = f + t:get("failures"); r = r + t:get("refused")
    x = x + t:get("crossed"); p = p + t:get("paused")
    if t:get("last_error") ~= "" then e = t:get("last_error") end
  end
  local errors = summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout
  io.write(string.format(
    "RESULT cycles=%d paused=%d failures=%d refused=%d crossed=%d requests=%d socket_errors=%d duration_us=%d p50_us=%d p99_us=%d\n",
    c, p, f, r, x, summary.requests, errors, summary.duration, latency:percentile(50), latency:percentile(99)))
  if e ~= "" then io.write("LAST_ERROR " .. e:gsub("\n", " ") .. "\n") end
end

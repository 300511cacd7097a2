-- wrk script for `ops/bench serve`: each thread posts its share of a file of signed payloads
-- (line i goes to thread i mod THREADS), each once, as Apple delivers them; a thread that is
-- done stops (wrk itself runs its whole -d).
-- Arguments (after --): FILE THREADS. Prints, at the end, "not_200=N" and each other status.
local threads = {}
local lines = {}
local sent = 0
local answered = 0
statuses = {}

function setup(thread)
    thread:set("id", #threads)
    table.insert(threads, thread)
end

function init(args)
    local file, count = args[1], tonumber(args[2])
    local i = 0
    for line in io.lines(file) do
        if line ~= "" then
            if i % count == id then lines[#lines + 1] = '{"signedPayload":"' .. line .. '"}' end
            i = i + 1
        end
    end
    -- wrk calls the first thread's request() once to check it, and never sends that one
    -- (script_verify_request): without this, that thread's first notification is never posted.
    if id == 0 then sent = -1 end
end

function request()
    sent = sent + 1
    local body = lines[math.max(1, math.min(sent, #lines))]
    return wrk.format("POST", "/apple/notifications", { ["Content-Type"] = "application/json" }, body)
end

function response(status, headers, body)
    answered = answered + 1
    if status ~= 200 then statuses[status] = (statuses[status] or 0) + 1 end
    if answered >= #lines then wrk.thread:stop() end
end

function done(summary, latency, requests)
    local total, parts = 0, {}
    for _, t in ipairs(threads) do
        for status, n in pairs(t:get("statuses")) do
            total = total + n
            parts[#parts + 1] = "status_" .. status .. "=" .. n
        end
    end
    io.write("not_200=" .. total .. " " .. table.concat(parts, " ") .. "\n")
end

-- wrk script for `ops/bench serve`: each thread posts its share of a file of signed payloads
-- (line i goes to thread i mod THREADS), each once, as Apple delivers them; a thread that is
-- done stops (wrk itself runs its whole -d).
-- Arguments (after --): FILE THREADS.
local threads = {}
local lines = {}
local sent = 0
local answered = 0

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
end

function request()
    sent = sent + 1
    local body = lines[math.min(sent, #lines)]
    return wrk.format("POST", "/apple/notifications", { ["Content-Type"] = "application/json" }, body)
end

function response(status, headers, body)
    answered = answered + 1
    if answered >= #lines then wrk.thread:stop() end
end

-- wrk at a fixed request rate (Debian's wrk 4.1 has no -R): each wrk thread hands out send
-- times ("slots") one interval apart, and a connection that is ready waits for the next free
-- slot before it sends. The thread's rate holds as long as some connection is free, whatever
-- the target's latency, so every target gets the same offered rate. wrk measures latency
-- from the send, after the wait.
--
--   wrk -t2 -c32 -d10s --latency -s scripts/bench/paced.lua URL -- RATE THREADS
--
-- RATE: requests per second for the whole run; THREADS: the same number as -t.

local ffi = require("ffi")
ffi.cdef [[
  struct bench_timespec { long tv_sec; long tv_nsec; };
  int clock_gettime(int clk_id, struct bench_timespec *tp);
]]
local CLOCK_MONOTONIC = 1
local ts = ffi.new("struct bench_timespec[1]")

local function now_ms()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
  return tonumber(ts[0].tv_sec) * 1000 + tonumber(ts[0].tv_nsec) / 1e6
end

local interval -- ms between two sends of this thread
local next_slot

function init(args)
  local rate = tonumber(args[1])
  local threads = tonumber(args[2])
  if not rate or not threads or rate <= 0 or threads <= 0 then
    error("paced.lua: give RATE and THREADS after --")
  end
  interval = 1000 * threads / rate
end

function delay()
  local t = now_ms()
  -- A thread that fell behind (every connection busy) starts again from now: no burst.
  if next_slot == nil or next_slot < t then
    next_slot = t
  end
  local wait = next_slot - t
  next_slot = next_slot + interval
  -- wrk takes whole milliseconds; round so that the waits average out on the schedule.
  return math.floor(wait + 0.5)
end

package redisquota

import "github.com/redis/go-redis/v9"

// A fleet's circuit in one scope is one hash, CircuitKey(name, scope):
//
//	e       the epoch: counts every transition (open, reopen, close)
//	st      0 closed, 1 open (half-open once u has passed)
//	u, sp   open: when the spell ends (server time, ms) and its length (ms)
//	r       the round of probes: counts every open spell and every round
//	        started afresh because its probes never reported
//	o, p, g the round's places out, probes that succeeded, and when the
//	        last place was granted (ms)
//	iK aK sK the window while closed: slot K (0 to 10) holds the index of
//	        the tenth of Window it counts (server time over its width),
//	        and its attempts and successes
//
// Times are the Redis server's (TIME), never the processes' clocks.

// circuitSyncScript sends a process's counts and probe verdicts for many
// scopes at once and answers the circuits' states and windows; the process
// decides by the breaker's rule whether the window opens the circuit, and
// asks for it in its next call.
//
// KEYS: one circuit hash per scope.
// ARGV: slot width (ms), probes, key TTL (ms, 0 = none), then per key nine
// values: the epoch the counts were made in, attempts, successes, an open
// spell to open the circuit with if it is closed in that epoch (ms, 0 =
// none), the round of the verdicts, probes that succeeded, failed and
// freed their places, and the spell to reopen with after a failure (ms).
//
// Reply, per key: epoch, state, ms left of the open spell, spell (ms),
// round, and the window's attempts and successes.
var circuitSyncScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local width = tonumber(ARGV[1])
local probes = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local cur = math.floor(now / width)
local slots = 11
local reply = {}
local function clearWindow(key)
  local f = {}
  for k = 0, slots - 1 do
    f[#f + 1] = 'i' .. k
    f[#f + 1] = 'a' .. k
    f[#f + 1] = 's' .. k
  end
  redis.call('HDEL', key, unpack(f))
end
for i, key in ipairs(KEYS) do
  local b = 3 + (i - 1) * 9
  local seen, da, ds, openSpell = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4])
  local vr, vp, vf, vn, nextSpell = tonumber(ARGV[b + 5]), tonumber(ARGV[b + 6]), tonumber(ARGV[b + 7]), tonumber(ARGV[b + 8]), tonumber(ARGV[b + 9])
  local h = {}
  local flat = redis.call('HGETALL', key)
  for j = 1, #flat, 2 do
    h[flat[j]] = tonumber(flat[j + 1])
  end
  local e, st, r = h['e'] or 0, h['st'] or 0, h['r'] or 0
  local u, sp, o, p = h['u'] or 0, h['sp'] or 0, h['o'] or 0, h['p'] or 0
  local function open(spell)
    e, st, r, u, sp, o, p = e + 1, 1, r + 1, now + spell, spell, 0, 0
    redis.call('HSET', key, 'e', e, 'st', st, 'r', r, 'u', u, 'sp', sp, 'o', 0, 'p', 0, 'g', 0)
    clearWindow(key)
  end
  if st == 0 and e == seen then
    if da > 0 then
      local k = cur % slots
      if h['i' .. k] ~= cur then
        h['a' .. k], h['s' .. k] = 0, 0
      end
      h['i' .. k], h['a' .. k], h['s' .. k] = cur, h['a' .. k] + da, h['s' .. k] + ds
      redis.call('HSET', key, 'i' .. k, cur, 'a' .. k, h['a' .. k], 's' .. k, h['s' .. k])
    end
    if openSpell > 0 then
      open(openSpell)
    end
  end
  if st == 1 and vr == r and vp + vf + vn > 0 then
    o = math.max(o - vp - vf - vn, 0)
    if vf > 0 then
      open(nextSpell)
    else
      p = p + vp
      if p >= probes then
        e, st, r, o, p = e + 1, 0, r + 1, 0, 0
        redis.call('HSET', key, 'e', e, 'st', 0, 'r', r, 'o', 0, 'p', 0)
        clearWindow(key)
        h = {}
      else
        redis.call('HSET', key, 'o', o, 'p', p)
      end
    end
  end
  local sa, ss = 0, 0
  if st == 0 then
    for k = cur - slots + 1, cur do
      local s = k % slots
      if h['i' .. s] == k then
        sa, ss = sa + h['a' .. s], ss + h['s' .. s]
      end
    end
  end
  if ttl > 0 then
    redis.call('PEXPIRE', key, ttl)
  end
  local left = 0
  if st == 1 then
    left = math.max(u - now, 0)
  end
  for _, v in ipairs({e, st, left, sp, r, sa, ss}) do
    reply[#reply + 1] = v
  end
end
return reply
`)

// circuitClaimScript grants a probe's place in an open circuit whose spell
// has ended, if the round has one free: Probes places a round, and a round
// whose places have all been out for longer than its spell plus a grace
// (the time a verdict takes to reach Redis) without deciding starts
// afresh, so that the places of a process that died holding them come
// back.
//
// KEYS: the circuit hash. ARGV: probes, grace (ms), key TTL (ms, 0 = none).
// Reply: granted (0 or 1), epoch, state, ms left of the open spell, spell
// (ms), round, ms before asking again may help.
var circuitClaimScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local key = KEYS[1]
local probes, grace, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local f = redis.call('HMGET', key, 'e', 'st', 'r', 'u', 'sp', 'o', 'p', 'g')
local e, st, r = tonumber(f[1]) or 0, tonumber(f[2]) or 0, tonumber(f[3]) or 0
local u, sp, o, p, g = tonumber(f[4]) or 0, tonumber(f[5]) or 0, tonumber(f[6]) or 0, tonumber(f[7]) or 0, tonumber(f[8]) or 0
if st ~= 1 then
  return {0, e, st, 0, 0, r, 0}
end
if now < u then
  return {0, e, 1, u - now, sp, r, u - now}
end
if o + p >= probes then
  local free = g + sp + grace
  if now < free then
    return {0, e, 1, 0, sp, r, free - now}
  end
  r, o, p = r + 1, 0, 0
end
o = o + 1
redis.call('HSET', key, 'r', r, 'o', o, 'p', p, 'g', now)
if ttl > 0 then
  redis.call('PEXPIRE', key, ttl)
end
return {1, e, 1, 0, sp, r, 0}
`)

// CircuitKey returns the Redis key of the circuit of a FleetBreaker named
// name in scope: a hash. The keys of one name share the hash tag {name},
// so that a Redis Cluster keeps them in one slot and one call serves every
// scope; a name that starts with '}', which would leave the braces empty,
// has keys of another shape with the hash tag {=}, as Keys.
func CircuitKey(name, scope string) string {
	if name[:min(len(name), 1)] == "}" {
		return "redisquota:={=}" + name + ":circuit:" + scope
	}
	return "redisquota:{" + name + "}:circuit:" + scope
}

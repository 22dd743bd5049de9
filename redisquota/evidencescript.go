package redisquota

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry/internal/sharedevidence"
)

// A fleet's evidence in one scope is one hash, EvidenceKey(name, scope),
// kept by the rule of sharedevidence.Memory (evidencescript_test.go holds
// the two to the same answers):
//
//	k, z        the fleet's failures in a row, and when a failure or an
//	            accept last changed it (µs): a window without one resets it
//	y, f, b     the fleet's typical latency of a success (whole ns), the
//	            last tenth folded into it (absent = none yet), and the
//	            typical latency before that tenth was
//	w           when a retry last worked in the fleet (µs); absent = never
//	iK          slot K (0 to 9): the tenth of the window it counts (time
//	            over the window's tenth)
//	aK cK tK    its attempts, accepts and timeouts
//	pK nK       its latency probes and their sum (ns)
//
// Times are microseconds of the Redis server's clock (TIME): one clock for
// the fleet, never the processes'. Lua's numbers are doubles, exact for
// integers below 2^53: 285 years in microseconds, and 104 days of summed
// latency in nanoseconds within one tenth of a window; sums beyond that
// lose their last digits, not their meaning. Every value crosses the
// script's boundary as an integer.

// evidenceSyncScript counts every scope's report of a process and answers
// the fleet's view of each.
//
// KEYS: one evidence hash per scope.
// ARGV: now (µs; 0 = Redis's TIME, which every process uses: another
// value is for tests that play a sequence of times), the window (µs), its
// tenth (µs), the keys' TTL (ms), then per key eight values: attempts,
// accepts, timeouts, reset (1 = an attempt was accepted since the last
// report), the tail of failures in a row, how long ago a retry worked (µs,
// -1 = none reported), probes, and their latencies' sum (ns).
//
// Reply, per key, nine integers: the window's attempts, accepts and
// timeouts; the streak; how long ago a retry last worked within the window
// (µs, -1 = none); the probes and their sum (ns) in the newest tenth that
// has any; the typical latency (ns); how long ago that tenth ended (µs).
var evidenceSyncScript = redis.NewScript(`
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local window, width, ttl = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local tenths = 10
local cur = math.floor(now / width)
local reply = {}
for i, key in ipairs(KEYS) do
  local b = 4 + (i - 1) * 8
  local da, dc, dt = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3])
  local reset, tail, ago = ARGV[b + 4] == '1', tonumber(ARGV[b + 5]), tonumber(ARGV[b + 6])
  local dp, dn = tonumber(ARGV[b + 7]), tonumber(ARGV[b + 8])
  local h = {}
  local flat = redis.call('HGETALL', key)
  for j = 1, #flat, 2 do
    h[flat[j]] = tonumber(flat[j + 1])
  end
  local s = tostring(cur % tenths)
  if h['i' .. s] ~= cur then
    h['a' .. s], h['c' .. s], h['t' .. s], h['p' .. s], h['n' .. s] = 0, 0, 0, 0, 0
  end
  h['i' .. s] = cur
  h['a' .. s], h['c' .. s], h['t' .. s] = h['a' .. s] + da, h['c' .. s] + dc, h['t' .. s] + dt
  h['p' .. s], h['n' .. s] = h['p' .. s] + dp, h['n' .. s] + dn

  local streak, streakAt = h['k'] or 0, h['z'] or 0
  if now - streakAt > window then
    streak = 0
  end
  if reset then
    streak, streakAt = tail, now
  elseif tail > 0 then
    streak, streakAt = streak + tail, now
  end
  local worked = h['w']
  if ago >= 0 and (worked == nil or now - ago > worked) then
    worked = now - ago
  end
  local typical, before, folded = h['y'] or 0, h['b'] or 0, h['f']
  local from = cur - tenths + 1
  if folded ~= nil then
    from = math.max(folded + 1, from)
  end
  for t = from, cur - 1 do
    local j = tostring(t % tenths)
    if h['i' .. j] == t and h['p' .. j] > 0 then
      local mean = h['n' .. j] / h['p' .. j]
      before = typical
      if typical == 0 then
        typical = math.floor(mean)
      else
        typical = math.floor(typical + (mean - typical) * math.min((t - folded) / tenths, 1))
      end
      folded = t
    end
  end
  redis.call('HSET', key, 'i' .. s, cur, 'a' .. s, h['a' .. s], 'c' .. s, h['c' .. s], 't' .. s, h['t' .. s],
    'p' .. s, h['p' .. s], 'n' .. s, h['n' .. s], 'k', streak, 'z', streakAt, 'y', typical, 'b', before)
  if folded ~= nil then
    redis.call('HSET', key, 'f', folded)
  end
  if worked ~= nil then
    redis.call('HSET', key, 'w', worked)
  end
  redis.call('PEXPIRE', key, ttl)

  local wa = -1
  if worked ~= nil and now - worked <= window then
    wa = now - worked
  end
  local attempts, accepts, timeouts = 0, 0, 0
  local newest = nil
  for j = 0, tenths - 1 do
    local tenth = h['i' .. j]
    if tenth ~= nil and tenth > cur - tenths and tenth <= cur then
      attempts = attempts + h['a' .. j]
      accepts = accepts + h['c' .. j]
      timeouts = timeouts + h['t' .. j]
      if h['p' .. j] > 0 and (newest == nil or tenth > h['i' .. newest]) then
        newest = j
      end
    end
  end
  local np, nn, latestAgo, typ = 0, 0, 0, 0
  if newest ~= nil then
    np, nn = h['p' .. newest], h['n' .. newest]
    latestAgo = math.max(now - (h['i' .. newest] + 1) * width, 0)
    typ = typical
    if folded ~= nil and h['i' .. newest] == folded then
      typ = before
    end
  end
  for _, v in ipairs({attempts, accepts, timeouts, streak, wa, np, nn, typ, latestAgo}) do
    reply[#reply + 1] = v
  end
end
return reply
`)

// evidenceReply is how many integers the script answers per scope.
const evidenceReply = 9

// EvidenceKey returns the Redis key of the evidence of a FleetAdaptive
// named name in scope: a hash, whose TTL every sync that reports the scope
// sets to twice the strategy's window. The keys of one name share the hash
// tag {name}, so that a Redis Cluster keeps them in one slot and one call
// serves every scope; a name that starts with '}', which would leave the
// braces empty, has keys of another shape with the hash tag {=}, as Keys.
func EvidenceKey(name, scope string) string {
	if name[:min(len(name), 1)] == "}" {
		return "redisquota:={=}" + name + ":evidence:" + scope
	}
	return "redisquota:{" + name + "}:evidence:" + scope
}

// evidenceArgs returns the script's arguments for reports at now (0 =
// Redis's clock), with the fleet's window.
func evidenceArgs(args []any, now, window time.Duration, reports []sharedevidence.Report) []any {
	window = min(window, 100*365*24*time.Hour) // twice it must not overflow
	ttl := max((2*window+time.Millisecond-1)/time.Millisecond, 1)
	args = append(args, now.Microseconds(), window.Microseconds(),
		max(window/sharedevidence.Tenths, time.Microsecond).Microseconds(), int64(ttl))
	for _, r := range reports {
		reset := 0
		if r.Reset {
			reset = 1
		}
		ago := int64(-1)
		if r.WorkedAgo >= 0 {
			ago = r.WorkedAgo.Microseconds()
		}
		args = append(args, r.Attempts, r.Accepts, r.Timeouts, reset, r.Tail, ago, r.Probes, r.ProbeNanos)
	}
	return args
}

// evidenceViews reads the script's answer for n scopes into views.
func evidenceViews(views []sharedevidence.View, v []int64, n int) ([]sharedevidence.View, error) {
	if len(v) != evidenceReply*n {
		return views, fmt.Errorf("unexpected reply of %d values for %d scopes", len(v), n)
	}
	for i := range n {
		r := v[evidenceReply*i : evidenceReply*(i+1)]
		view := sharedevidence.View{
			Attempts: float64(r[0]), Accepts: float64(r[1]), Timeouts: float64(r[2]),
			Streak: r[3], WorkedAgo: -1,
		}
		if r[4] >= 0 {
			view.WorkedAgo = time.Duration(r[4]) * time.Microsecond
		}
		if r[5] > 0 && r[6] > 0 { // as Memory: no latency to judge by, no typical
			view.Latest = float64(r[6]) / float64(r[5])
			view.Typical = float64(r[7])
			view.LatestAgo = time.Duration(r[8]) * time.Microsecond
		}
		views = append(views, view)
	}
	return views, nil
}

package redisquota

import "github.com/redis/go-redis/v9"

// syncScript is the only code that changes the shared count. It runs
// atomically on the server and does, for one process:
//
//  1. check that the three keys hold what they should (a hash, a hash, a
//     sorted set) and answer a WRONGTYPE error naming the key otherwise;
//  2. create the pool full if it does not exist (status 1);
//  3. reconcile the leased count with the leases that exist, if the leases
//     hash or the expiry set was lost without the pool (see below);
//  4. reclaim every lease whose expiry (server time) has passed;
//  5. settle this process's lease: what it spent since the last call, grants
//     it never received (a reply lost on the way), the refunds it sent since
//     the last acknowledged call; a lease that is gone while the process
//     reports tokens in hand is reported lost (status 2); a negative
//     balance, tokens the process spent while a call of its gave them back
//     to the pool (see Quota.adjustLease), is taken from the pool, and what
//     the pool cannot pay stays owed in the balance answered;
//  6. grant tokens up to the wanted balance, or return the excess;
//  7. renew the lease's expiry and the keys' time to live.
//
// Reconciliation. The pool's leased count is only as good as the lease
// records behind it: Redis evicts whole keys under maxmemory, and a partial
// flush or a DEL can take the leases hash or the expiry set and leave the
// pool. Tokens leased to records that are gone would then never come back
// (a process whose record is gone has its tokens dropped, not returned), and
// leases without an expiry would never be reclaimed if their holder died.
// Every lease is three fields of the leases hash (id:b, id:g, id:r) and one
// member of the expiry set, so while both keys are whole HLEN = 3 x ZCARD,
// and no lease means nothing leased. Each call checks that in O(1); only
// when it fails does it walk the leases (O(leases)): leased becomes the sum
// of the balances on record and the rest goes back to the pool at once; a
// lease that lost its expiry is given one of this call's lease TTL (its
// holder renews it, a dead holder's tokens come back when it passes, so
// processes sharing a key should use the same LeaseTTL); expiries and
// stray fields of leases that are gone are dropped, so that the check
// holds again and the walk is not repeated.
//
// KEYS: pool hash, leases hash, expiry sorted set.
// ARGV: id, capacity, balance in hand (negative = owed), grants received
// (cumulative), refunds acknowledged (cumulative), refunds recorded
// (cumulative), wanted balance (-1 = release the lease), least useful
// balance, lease TTL in ms, key TTL in ms (0 = none).
//
// Reply: {status, granted, balance, pool tokens, leased tokens, capacity}.
var syncScript = redis.NewScript(`
local pool, leases, exp = KEYS[1], KEYS[2], KEYS[3]
local kinds = {'hash', 'hash', 'zset'}
for i = 1, 3 do
  local t = redis.call('TYPE', KEYS[i])['ok']
  if t ~= 'none' and t ~= kinds[i] then
    return redis.error_reply('WRONGTYPE redisquota: key ' .. KEYS[i] .. ' holds a ' .. t .. ', not a ' .. kinds[i])
  end
end
local id = ARGV[1]
local cap = tonumber(ARGV[2])
local bal = tonumber(ARGV[3])
local gack = tonumber(ARGV[4])
local rack = tonumber(ARGV[5])
local rtotal = tonumber(ARGV[6])
local want = tonumber(ARGV[7])
local need = tonumber(ARGV[8])
local ttl = tonumber(ARGV[9])
local keyttl = tonumber(ARGV[10])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local status = 0
local tokens, leased
local st = redis.call('HMGET', pool, 'tokens', 'leased')
if not st[1] then
  tokens, leased = cap, 0
  redis.call('DEL', leases, exp)
  status = 1
else
  tokens, leased = tonumber(st[1]), tonumber(st[2])
  local nfields = redis.call('HLEN', leases)
  if nfields ~= 3 * redis.call('ZCARD', exp) or (nfields == 0 and leased ~= 0) then
    local all = redis.call('HGETALL', leases)
    local held = {}
    for i = 1, #all, 2 do
      local f = all[i]
      if string.sub(f, -2) == ':b' then
        held[string.sub(f, 1, -3)] = tonumber(all[i + 1])
      end
    end
    local sum = 0
    for lid, b in pairs(held) do
      sum = sum + b
      if not redis.call('ZSCORE', exp, lid) then
        redis.call('ZADD', exp, now + ttl, lid)
      end
      -- counts that are gone restart at 0, so that no grant is mistaken
      -- for one lost on the way and refunds count from what the holder
      -- says was acknowledged
      redis.call('HSETNX', leases, lid .. ':g', 0)
      redis.call('HSETNX', leases, lid .. ':r', 0)
    end
    for i = 1, #all, 2 do
      local f = all[i]
      if not held[string.sub(f, 1, -3)] then
        redis.call('HDEL', leases, f)
      end
    end
    for _, m in ipairs(redis.call('ZRANGE', exp, 0, -1)) do
      if not held[m] then
        redis.call('ZREM', exp, m)
      end
    end
    tokens = tokens + leased - sum
    leased = sum
  end
end

local dead = redis.call('ZRANGEBYSCORE', exp, '-inf', now, 'LIMIT', 0, 256)
for _, d in ipairs(dead) do
  local b = tonumber(redis.call('HGET', leases, d .. ':b') or '0')
  tokens = tokens + b
  leased = leased - b
  redis.call('HDEL', leases, d .. ':b', d .. ':g', d .. ':r')
  redis.call('ZREM', exp, d)
end

local refund
local debt = 0
local rec = redis.call('HMGET', leases, id .. ':b', id .. ':g', id .. ':r')
if rec[1] then
  local sbal, sg, sr = tonumber(rec[1]), tonumber(rec[2]), tonumber(rec[3])
  local unreceived = math.max(sg - gack, 0)
  local held = math.max(math.min(bal, sbal - unreceived), 0)
  debt = math.max(-bal, 0)
  tokens = tokens + unreceived
  leased = leased - (sbal - held)
  bal = held
  refund = rtotal - math.max(sr, rack)
else
  if bal > 0 then
    status = 2
  end
  bal = 0
  refund = rtotal - rack
end
if refund < 0 then refund = 0 end
if leased < 0 then leased = 0 end
tokens = math.max(math.min(tokens + refund, cap - leased), 0)
local paid = math.min(debt, tokens)
tokens = tokens - paid
local owed = debt - paid

local granted = 0
if want < 0 then
  tokens = math.min(tokens + bal, cap)
  leased = math.max(leased - bal, 0)
  bal = 0
  redis.call('HDEL', leases, id .. ':b', id .. ':g', id .. ':r')
  redis.call('ZREM', exp, id)
else
  if want > bal then
    granted = math.min(want - bal, tokens)
    if bal + granted < need then granted = 0 end
  elseif want < bal then
    tokens = tokens + (bal - want)
    leased = leased - (bal - want)
    bal = want
  end
  tokens = tokens - granted
  leased = leased + granted
  bal = bal + granted
  redis.call('HSET', leases, id .. ':b', bal, id .. ':g', gack + granted, id .. ':r', rtotal)
  redis.call('ZADD', exp, now + ttl, id)
end
redis.call('HSET', pool, 'tokens', tokens, 'leased', leased, 'capacity', cap)
if keyttl > 0 then
  redis.call('PEXPIRE', pool, keyttl)
  redis.call('PEXPIRE', leases, keyttl)
  redis.call('PEXPIRE', exp, keyttl)
end
return {status, granted, bal - owed, tokens, leased, cap}
`)

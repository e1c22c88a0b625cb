import PorticoCrypto

/// The Lua script every fleet decision runs in Redis: in one atomic step, the replay check, each
/// rate limit's GCRA (exactly as ``GCRAState/acquire(now:)`` computes it, on the server's clock)
/// and the nonce's record under its key's budget. One `EVALSHA`, so one round trip per request.
///
/// `KEYS`: the bucket of each limit in order, then (with a nonce) the nonce's key, the key id's
/// budget (a sorted set of its live nonces by expiry) and its refusal mark.
/// `ARGV`: the number of limits; `count`, `periodNanos`, `burst` of each; then `1`, the nonce, its
/// expiry (seconds since 1970), the key's quota and the signature's `created`, or `0`; then, for
/// tests only, a time (seconds, nanoseconds) used instead of `TIME`.
///
/// The reply is `{status, detail, allowed₁, remaining₁, reset₁, retry₁, …}` for the limits decided:
/// status 0 admitted; 1 the nonce was seen (a replay; no bucket touched); 2 refused by limit
/// `detail` (1-based); 3 the key's nonce budget is full, or its refusal mark covers the signature
/// (then no bucket is touched), `detail` seconds until its earliest nonce frees.
///
/// The nonce is recorded whether the limits admit the request or refuse it (statuses 0 and 2): a
/// request refused once must never pass later. Without room in the key's budget, the key's refusal
/// mark is raised to `created` instead (``NonceStore``), as the in-memory store does.
///
/// Lua's numbers are doubles: each time is kept relative to the current second (the bucket's
/// `s` field moves on at every call), and the policy bounds `burst × period` below 2⁵³ ns
/// (``PolicyDocumentReader``'s shared-limit check), so every value computed is an exact integer.
/// Buckets expire once they owe nothing, when they are indistinguishable from new ones.
enum FleetScript {
    static let source = """
        local function idiv(a, b)
          local q = math.floor(a / b)
          if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
          return q
        end
        local limits = tonumber(ARGV[1])
        local hasNonce = ARGV[2 + 3 * limits] == '1'
        local testTime = 2 + 3 * limits + (hasNonce and 5 or 1)
        local sec, ns
        -- A bucket outlives the moment it is full again by a second; with a given time (tests,
        -- whose time is not Redis's expiry clock) by an hour.
        local linger = 1000
        if ARGV[testTime] then
          sec = tonumber(ARGV[testTime]); ns = tonumber(ARGV[testTime + 1]); linger = 3600000
        else
          local t = redis.call('TIME'); sec = tonumber(t[1]); ns = tonumber(t[2]) * 1000
        end
        local created = tonumber(ARGV[6 + 3 * limits])
        local function marked()
          local mark = redis.call('GET', KEYS[limits + 3])
          return mark and tonumber(mark) >= created
        end
        local function wait()
          local earliest = redis.call('ZRANGE', KEYS[limits + 2], 0, 0, 'WITHSCORES')[2]
          return earliest and math.max(1, tonumber(earliest) - sec) or 1
        end
        if hasNonce then
          if redis.call('EXISTS', KEYS[limits + 1]) == 1 then return {1, 0} end
          if marked() then return {3, wait()} end
        end
        -- Records the nonce in its key's budget; without room, raises the key's refusal mark and
        -- returns the seconds until the key's earliest nonce frees.
        local function record()
          local nonce = ARGV[3 + 3 * limits]
          local expiry = tonumber(ARGV[4 + 3 * limits])
          local quota = tonumber(ARGV[5 + 3 * limits])
          local budget = KEYS[limits + 2]
          local ttl = math.max(1, expiry - sec)
          redis.call('ZREMRANGEBYSCORE', budget, '-inf', sec)
          if redis.call('ZCARD', budget) >= quota then
            local mark = redis.call('GET', KEYS[limits + 3])
            if not mark or tonumber(mark) < created then
              local left = redis.call('PTTL', KEYS[limits + 3])
              redis.call('SET', KEYS[limits + 3], created, 'PX', math.max(ttl * 1000, left))
            end
            return wait()
          end
          redis.call('SET', KEYS[limits + 1], '1', 'NX', 'PX', ttl * 1000)
          redis.call('ZADD', budget, expiry, nonce)
          if redis.call('TTL', budget) < ttl then redis.call('EXPIRE', budget, ttl) end
          return nil
        end
        local reply = {0, 0}
        for i = 1, limits do
          local count = tonumber(ARGV[3 * i - 1])
          local period = tonumber(ARGV[3 * i])
          local burst = tonumber(ARGV[3 * i + 1])
          local key = KEYS[i]
          local s = redis.call('HMGET', key, 'c', 'p', 'b', 's', 't', 'f', 'l')
          local tat, frac, latest
          if s[1] and tonumber(s[1]) == count and tonumber(s[2]) == period and tonumber(s[3]) == burst then
            local shift = (sec - tonumber(s[4])) * 1000000000
            tat = tonumber(s[5]) - shift; frac = tonumber(s[6]); latest = tonumber(s[7]) - shift
          else
            tat = ns; frac = 0; latest = ns
          end
          local now = math.max(ns, latest)
          latest = now
          if tat < now then tat = now; frac = 0 end
          local debt = (tat - now) * count + frac
          local tolerance = (burst - 1) * period
          local allowed, remaining, reset, retry
          if debt > tolerance then
            allowed = 0; remaining = 0
            reset = idiv(debt + count - 1, count); retry = idiv(debt - tolerance + count - 1, count)
          else
            local step = idiv(period, count)
            tat = tat + step; frac = frac + (period - step * count)
            if frac >= count then frac = frac - count; tat = tat + 1 end
            local owed = debt + period
            if owed > tolerance then remaining = 0 else remaining = idiv(tolerance - owed, period) + 1 end
            allowed = 1; reset = idiv(owed + count - 1, count); retry = 0
          end
          redis.call('HSET', key, 'c', count, 'p', period, 'b', burst, 's', sec, 't', tat, 'f', frac, 'l', latest)
          redis.call('PEXPIRE', key, idiv(math.max(tat - ns, 0), 1000000) + linger)
          reply[#reply + 1] = allowed; reply[#reply + 1] = remaining; reply[#reply + 1] = reset; reply[#reply + 1] = retry
          if allowed == 0 then
            if hasNonce then record() end
            reply[1] = 2; reply[2] = i; return reply
          end
        end
        if hasNonce then
          local wait = record()
          if wait then reply[1] = 3; reply[2] = wait; return reply end
        end
        return reply
        """

    /// The script's SHA-1 in hex, by which `EVALSHA` names it.
    static let sha1: String = {
        guard let digest = Array(source.utf8).withUnsafeBytes(OpenSSLDigest.sha1) else {
            preconditionFailure("OpenSSL could not compute SHA-1")
        }
        return digest.map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }()
}

// Preloaded (node --import) into the cache-tests origin server, whose server.mjs calls
// `server.listen(port)` and so would listen on every interface. This makes a listen() given only a
// port listen on CACHE_TESTS_BIND_HOST (127.0.0.1 by default) instead, so that the origin is
// reachable from this machine only. Any other form of listen() is left as it is.
import net from 'node:net'

const host = process.env.CACHE_TESTS_BIND_HOST || '127.0.0.1'
const listen = net.Server.prototype.listen

net.Server.prototype.listen = function (...args) {
  const onlyPort = args.length === 1 &&
    (typeof args[0] === 'number' || (typeof args[0] === 'string' && /^\d+$/.test(args[0])))
  if (onlyPort) return listen.call(this, Number(args[0]), host)
  return listen.apply(this, args)
}

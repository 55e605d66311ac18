//! What differs between the server versions (docs/servers.md): a server older than the minimum,
//! Redis 6.2, is refused at connect with an error that says so; on Redis 6.2, which wraps an
//! error raised inside a script as `ERR Error running script …`, a name in use as another kind
//! of lock is still the clear invalid-argument error it is on Redis 7.
//! (What every version shares, every kind on every topology, is in `topologies.rs`.)

mod support;

use redislock::{Client, ErrorKind};
use support::{RedisServer, Server, unique_name};

/// Redis 6.0 (PyPI's redis-server wheel, `redis-server-6.0`): the first call is refused with
/// the server's version and the minimum, before any lock is tried; nothing is written.
#[test]
fn a_server_below_the_minimum_is_refused_at_connect() {
    let srv = RedisServer::start_on(Server::Redis60, &[]);
    let c = Client::open(&srv.url()).unwrap();
    let name = unique_name("old-server");
    for e in [
        c.try_acquire(&name).unwrap_err(),
        c.semaphore(&name, 2).try_acquire(1).unwrap_err(),
        c.rw_lock(&name).try_read().unwrap_err(),
    ] {
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        let text = e.to_string();
        println!("{text}");
        assert!(
            text.contains(&format!("{} is Redis 6.0.", srv.addr()))
                && text.contains("needs Redis 6.2 or newer"),
            "{text}"
        );
    }
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut srv.conn()).unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}

/// Redis 6.2, the minimum: every pairing of kinds on one name that a script meets as a key of
/// the wrong type is the invalid-argument error, not Redis' wrapped `ERR`.
#[test]
fn another_kind_on_a_name_is_refused_clearly_on_redis_6_2() {
    let srv = RedisServer::start_on(Server::Redis62, &[]);
    let c = Client::open(&srv.url()).unwrap();
    let check = |e: redislock::Error| {
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains("another kind"), "{e}");
    };

    let name = unique_name("kinds-lock");
    let lock = c.try_acquire(&name).unwrap();
    check(c.semaphore(&name, 2).try_acquire(1).unwrap_err());
    check(c.redisson_lock(&name).try_acquire().unwrap_err());
    lock.release().unwrap();

    let name = unique_name("kinds-sem");
    let permit = c.semaphore(&name, 2).try_acquire(1).unwrap();
    check(c.rw_lock(&name).try_read().unwrap_err());
    check(c.rw_lock(&name).try_write().unwrap_err());
    permit.release().unwrap();

    let name = unique_name("kinds-redisson");
    let held = c.redisson_lock(&name).try_acquire().unwrap();
    check(c.semaphore(&name, 2).try_acquire(1).unwrap_err());
    check(c.rw_lock(&name).try_read().unwrap_err());
    held.release().unwrap();
}

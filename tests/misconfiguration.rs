//! Misconfigurations as a new user makes them, each a clear error within its bound: the kind of
//! error a caller tells it apart by, a message that names the cause (with the server's own
//! words where it answered), and no wait past the timeouts. TLS against a plain server and
//! plain against a TLS port; a port that accepts and never answers; a wrong password; an ACL
//! user without a command a kind needs (every kind); a database the server does not have; a
//! Cluster URL for a server without cluster support; a Sentinel URL for a plain server, and for
//! sentinels that do not know the master's name; and what is refused already: a Redlock URL
//! naming a master twice, a server below the minimum version.
//!
//! Cheap: one shared server (`Shared::get`), one shared Sentinel group, listeners of the test's
//! own, timeouts of [`T`].

mod support;

use std::time::{Duration, Instant};

use redislock::{Client, ClientBuilder, Error, ErrorKind};
use support::{Pki, RedisServer, Server, Shared, TlsServer, Topology, silent_port, unique_name};

redislock_testkit::shared_keeper!();

/// Every timeout of the clients here.
const T: Duration = Duration::from_millis(400);

fn quick(url: &str) -> ClientBuilder {
    Client::builder(url)
        .connect_timeout(T)
        .read_timeout(T)
        .write_timeout(T)
        .checkout_timeout(2 * T)
}

/// The shared server's port.
fn plain_port() -> u16 {
    Shared::get(Topology::Single).nodes()[0]
}

/// Runs `call`, and checks its error: `kind`, every word of `words` in its message, and within
/// twice `bound`.
#[track_caller]
fn fails<T: std::fmt::Debug>(
    case: &str,
    bound: Duration,
    kind: ErrorKind,
    words: &[&str],
    call: impl FnOnce() -> Result<T, Error>,
) -> Error {
    let started = Instant::now();
    let e = call().expect_err(case);
    let took = started.elapsed();
    println!("{case}: {:?} after {} ms: {e}", e.kind(), took.as_millis());
    assert_eq!(e.kind(), kind, "{case}: {e}");
    for w in words {
        assert!(e.to_string().contains(w), "{case}: no {w:?} in: {e}");
    }
    assert!(took < 2 * bound, "{case}: {took:?}, bound {bound:?}: {e}");
    e
}

// ---- TLS and plain, both ways ---------------------------------------------------------------

#[test]
fn tls_to_a_plain_server_fails_within_the_connect_timeout_naming_tls() {
    let port = plain_port();
    for url in [
        format!("rediss://127.0.0.1:{port}/"),
        format!("rediss-cluster://127.0.0.1:{port}"),
        format!("rediss-redlock://127.0.0.1:{port},127.0.0.2:{port},127.0.0.3:{port}"),
        // TLS to the data nodes (the sentinels are asked in plain).
        Shared::get(Topology::Sentinel)
            .url()
            .replace("redis-sentinel://", "rediss-sentinel://"),
    ] {
        let c = quick(&url).build().unwrap();
        fails(&url, T, ErrorKind::Connection, &["TLS", "redis://"], || {
            c.try_acquire(unique_name("tls-plain"))
        });
    }
}

#[test]
fn tls_to_a_port_that_never_answers_fails_within_the_connect_timeout() {
    let (_l, port) = silent_port();
    for url in [
        format!("rediss://127.0.0.1:{port}/"),
        format!("rediss-cluster://127.0.0.1:{port}"),
    ] {
        let c = quick(&url).build().unwrap();
        fails(
            &url,
            T,
            ErrorKind::Connection,
            &["no TLS handshake within", "redis://"],
            || c.try_acquire(unique_name("tls-silent")),
        );
    }
    // A "sentinel" that never answers: asked within the connect timeout.
    let url = format!("redis-sentinel://127.0.0.1:{port}/#mymaster");
    let c = quick(&url).build().unwrap();
    fails(
        &url,
        T,
        ErrorKind::Connection,
        &["no sentinel named"],
        || c.try_acquire(unique_name("sentinel-silent")),
    );
}

/// A connect timeout too short for setting up TLS at all (redis-rs makes the TLS client, with its
/// root certificates, inside the connect): the error still names TLS, not just "Connection timed
/// out" (as under valgrind on a loaded machine, where that takes seconds).
#[test]
fn a_connect_timeout_too_short_for_tls_names_tls() {
    let url = format!("rediss://127.0.0.1:{}/", plain_port());
    let c = quick(&url)
        .connect_timeout(Duration::from_millis(1))
        .build()
        .unwrap();
    fails(
        &url,
        T,
        ErrorKind::Connection,
        &["TLS", "within 1 ms"],
        || c.try_acquire(unique_name("tls-1ms")),
    );
}

#[test]
fn plain_to_a_tls_port_names_tls() {
    let pki = Pki::new();
    let srv = TlsServer::start(&pki, "good");
    let c = quick(&format!("redis://127.0.0.1:{}/", srv.port))
        .build()
        .unwrap();
    fails(
        "redis:// to a TLS port",
        T,
        ErrorKind::Connection,
        &["rediss://"],
        || c.try_acquire(unique_name("plain-tls")),
    );
}

/// A plain connection to a server that never answers: the attempt times out, and its give-back
/// (it may have been applied) too: within twice the read timeout (docs/cli.md).
#[test]
fn a_port_that_never_answers_is_a_timeout() {
    let (_l, port) = silent_port();
    let c = quick(&format!("redis://127.0.0.1:{port}/"))
        .build()
        .unwrap();
    let e = fails(
        "redis:// to a silent port",
        2 * T,
        ErrorKind::Connection,
        &[],
        || c.try_acquire(unique_name("silent")),
    );
    assert!(e.is_timeout(), "{e}");
}

// ---- credentials, ACL, database -------------------------------------------------------------

/// An ACL user `user` with password `pw` on the shared server: every command and key but
/// `minus`.
fn acl_user(minus: &str) -> (String, String) {
    let user = unique_name("mc-user");
    let mut admin = Shared::get(Topology::Single).conn_for("x");
    redis::cmd("ACL")
        .arg("SETUSER")
        .arg(&user)
        .arg("on")
        .arg(">mc-pw")
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .arg(format!("-{minus}"))
        .query::<()>(&mut admin)
        .unwrap();
    let url = format!("redis://{user}:mc-pw@127.0.0.1:{}/", plain_port());
    (user, url)
}

#[test]
fn a_wrong_password_keeps_the_servers_words() {
    let (user, _) = acl_user("debug");
    let url = format!("redis://{user}:Wr0ng@127.0.0.1:{}/", plain_port());
    let c = quick(&url).build().unwrap();
    let e = fails(
        "wrong password",
        T,
        ErrorKind::Redis,
        &["WRONGPASS", "invalid username-password pair"],
        || c.try_acquire(unique_name("wrongpw")),
    );
    assert_eq!(e.redis_code(), Some("WRONGPASS"));
    assert!(!e.to_string().contains("Wr0ng"), "{e}");
}

#[test]
fn a_user_without_a_command_a_kind_needs_is_told_which() {
    let (_, without_set) = acl_user("set");
    let (_, without_evalsha) = acl_user("evalsha");
    let denied = |url: &str| quick(url).build().unwrap();
    let (c_set, c_eval) = (denied(&without_set), denied(&without_evalsha));
    let name = unique_name("acl");
    let names = [format!("{name}-a"), format!("{name}-b")];
    type Attempt<'a> = Box<dyn FnOnce() -> Result<(), Error> + 'a>;
    let cases: [(&str, &str, Attempt<'_>); 7] = [
        (
            "exclusive",
            "'set'",
            Box::new(|| c_set.try_acquire(&name).map(drop)),
        ),
        (
            "read",
            "'evalsha'",
            Box::new(|| c_eval.rw_lock(&name).try_read().map(drop)),
        ),
        (
            "write",
            "'evalsha'",
            Box::new(|| c_eval.rw_lock(&name).try_write().map(drop)),
        ),
        (
            "semaphore",
            "'evalsha'",
            Box::new(|| c_eval.semaphore(&name, 2).try_acquire(1).map(drop)),
        ),
        (
            "set",
            "'evalsha'",
            Box::new(|| c_eval.lock_all(&names).try_acquire().map(drop)),
        ),
        (
            "redisson",
            "'evalsha'",
            Box::new(|| c_eval.redisson_lock(&name).try_acquire().map(drop)),
        ),
        (
            "leader",
            "'evalsha'",
            Box::new(|| c_eval.leader(&name).identity("a").try_campaign().map(drop)),
        ),
    ];
    for (kind, command, attempt) in cases {
        let e = fails(kind, T, ErrorKind::Redis, &["NOPERM", command], attempt);
        assert_eq!(e.redis_code(), Some("NOPERM"), "{kind}: {e}");
    }
}

#[test]
fn a_database_the_server_does_not_have() {
    let c = quick(&format!("redis://127.0.0.1:{}/99", plain_port()))
        .build()
        .unwrap();
    fails(
        "database 99",
        T,
        ErrorKind::Redis,
        &["DB index is out of range", "database 99", "`databases`"],
        || c.try_acquire(unique_name("db")),
    );
}

// ---- topologies -----------------------------------------------------------------------------

#[test]
fn a_cluster_url_for_a_server_not_in_cluster_mode() {
    let c = quick(&format!("redis-cluster://127.0.0.1:{}", plain_port()))
        .build()
        .unwrap();
    fails(
        "redis-cluster:// to a plain server",
        T,
        ErrorKind::Connection,
        &[
            "not in cluster mode",
            "cluster support disabled",
            "redis://",
        ],
        || c.try_acquire(unique_name("no-cluster")),
    );
}

#[test]
fn a_sentinel_url_for_a_plain_server() {
    let c = quick(&format!(
        "redis-sentinel://127.0.0.1:{}/#mymaster",
        plain_port()
    ))
    .build()
    .unwrap();
    fails(
        "redis-sentinel:// to a plain server",
        T,
        ErrorKind::Connection,
        &["not a sentinel", "unknown command", "sentinels' addresses"],
        || c.try_acquire(unique_name("no-sentinel")),
    );
}

#[test]
fn sentinels_that_do_not_know_the_masters_name() {
    let group = Shared::get(Topology::Sentinel);
    let url = group.url().replace("#mymaster", "#no-such-master");
    assert_ne!(url, group.url());
    let c = quick(&url).build().unwrap();
    fails(
        "an unknown master name",
        T,
        ErrorKind::Connection,
        &["\"no-such-master\"", "does not know it", "name after #"],
        || c.try_acquire(unique_name("unknown-master")),
    );
}

// ---- refused already ------------------------------------------------------------------------

#[test]
fn a_redlock_url_naming_a_master_twice() {
    let e = Client::open("redlock://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7001").unwrap_err();
    println!("{e}");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("127.0.0.1:7001"), "{e}");
}

#[test]
fn a_server_below_the_minimum_version() {
    let srv = RedisServer::start_on(Server::Redis60, &[]);
    let c = quick(&srv.url()).build().unwrap();
    fails(
        "Redis 6.0",
        T,
        ErrorKind::InvalidArgument,
        &["is Redis 6.0.", "needs Redis 6.2 or newer"],
        || c.try_acquire(unique_name("old")),
    );
}

//! Blocking Redis locks for threaded Rust programs, with a C ABI so that C and PHP (through FFI)
//! use the very same implementation.
//!
//! - Acquire is the classic `SET key token NX PX lease` with a 128-bit random token; release and
//!   extend are Lua compare-and-act scripts, so programs using that classic pattern on the same key
//!   exclude and are excluded by this library.
//! - Every lock has a finite lease. Auto-renewed locks (the default) have a renewal thread that
//!   extends the lease every lease/3 while the key still holds the token; a lock found gone, taken
//!   over, or unrenewable until its lease ran out is marked lost, and the holder can see it. So a
//!   long critical section never loses the lock to expiry, and a crashed holder's lock frees
//!   itself.
//! - Waiting does not spin: a release hands the lock directly to the oldest waiter and wakes it
//!   (one `BLPOP` wake-up, no polling), so waiters are served in arrival order and the releasing
//!   thread cannot take the lock back ahead of them; a jittered fallback re-check covers holders
//!   that vanish.
//! - Optional fencing tokens, strictly increasing per lock name.
//! - A lock is released by [`release()`](Lock::release), or when its guard is dropped.
//! - Locks held at least and at most so long ([`LockRequest::at_least`],
//!   [`LockRequest::at_most`]): a job on several hosts runs once per interval.
//! - Beyond the exclusive lock: read/write locks ([`Client::rw_lock`]), semaphores
//!   ([`Client::semaphore`]) and sets of locks taken all or none ([`Client::lock_all`]), with the
//!   same leases, renewal, fair waiting and lost-grant reports; leader election
//!   ([`Client::leader`]) with an epoch that fences out earlier leaders, and observers woken by
//!   each change.
//! - Metrics ([`Client::metrics`]): waits, holds, handoffs, renewals, lost locks, as Prometheus
//!   text or through the `metrics` crate.
//! - Fork-safe: a client used after `fork()` rebuilds its pools; a lock inherited across fork is
//!   not the child's.
//! - Real timeouts everywhere, distinct errors ([`ErrorKind`]), and no panic across the C boundary.
//!
//! ```no_run
//! use std::time::Duration;
//! use redislock::Client;
//!
//! let client = Client::open("redis://127.0.0.1:6379/")?;
//! let lock = client.acquire("stock:42", Duration::from_secs(5))?;
//! // ... the critical section ...
//! lock.release()?;
//! # Ok::<(), redislock::Error>(())
//! ```
//!
//! The package is `redislock-sync` on crates.io (the name `redislock` belongs to another crate
//! there); the library is `redislock`: `redislock-sync = "0.4"` in `[dependencies]`, and
//! `use redislock::Client`. It needs Rust 1.88 or newer.
//!
//! This page is the reference for what a lock does: its [semantics](#semantics), the [kinds of
//! lock](#kinds-of-lock), [leader election](#leader-election), [metrics](#metrics) and the
//! [errors](#errors). The repository's `README.md` has the set-up commands and the quick starts
//! in Rust, C and PHP; its `docs/` directory has the rest: `docs/topologies.md` (Sentinel, Redis
//! Cluster, Redlock), `docs/guarantees.md` (what holds, and what each fault does),
//! `docs/operations.md` (configuration, threads and persistent clients, logs, security, the soak
//! test), `docs/install.md` (installing for C and PHP), `docs/c-api.md` (the C API),
//! `docs/leaders.md` (leader election), `docs/metrics.md` (every metric), `docs/redisson.md`
//! (sharing locks with Java services that use Redisson, [`Client::redisson_lock`]) and
//! `docs/servers.md` (the Redis and Valkey versions tested); the PHP package's is
//! `bindings/php/README.md`.
//!
//! # Semantics
//!
//! ## Where a lock lives
//!
//! The lock named N is the Redis string key `prefix + N` (the prefix is empty unless configured
//! with [`ClientBuilder::key_prefix`]) holding the owner's token, with a millisecond expiry. Names
//! are arbitrary bytes up to 4096 ([`MAX_NAME_LEN`]). Companion keys live in the same Redis Cluster
//! slot: `{key}:fence` (fencing counter), `{key}:q` (the waiter queue, a list), `{key}:e:<id>` (a
//! waiter's liveness key) and `{key}:s:<id>` (a waiter's wake-up list); with Redlock,
//! `{key}:wanted` and `{key}:wake` (waiters' mark and wake list, see Redlock in
//! `docs/topologies.md`). A name with its own `{hash tag}` keeps it: `{orders}:7` →
//! `{orders}:7:fence`.
//!
//! The URL chooses where the keys live: one server, the master of a Sentinel group, the master of
//! the lock's hash slot in a Redis Cluster, or a majority of independent masters (Redlock); see
//! [`Client::open`] and `docs/topologies.md`. The API and its semantics are the same on each, with
//! the exceptions that page states.
//!
//! ## Tokens
//!
//! Tokens are 128 bits from the operating system's generator. A token is a bearer secret: no
//! message, log or `Debug` output shows more than its first four characters.
//!
//! ## Lease
//!
//! Every lock has a finite lease (default 30 s). With auto-renewal (the default) a renewal thread
//! extends the key to a full lease every lease/3 while the key still holds the token. Without it,
//! the lock simply expires after the lease unless you [`extend`](Lock::extend) it.
//! [`remaining()`](Lock::remaining) tells how long the lock is surely still yours: the lease
//! counted from before the request was sent (for a lock handed over to a waiter: from the handoff's
//! arrival, less 1 ms), less a drift margin of 2 ms + 1%.
//!
//! Leases run from 1 ms to 30 days ([`MAX_LEASE`]; auto-renewed: at least 100 ms,
//! [`MIN_RENEWED_LEASE`]); wait bounds up to 30 days ([`MAX_WAIT`]).
//!
//! ## Release, and release on drop
//!
//! [`release()`](Lock::release) deletes the key if it still holds the token (handing the lock to
//! the oldest waiter, if there is one) and says whether it did: `Ok(())`, or
//! [`NotHeld`](ErrorKind::NotHeld) when the lock had expired, been lost or taken over meanwhile.
//! A guard dropped while its lock is held releases it too, so a lock never outlives its guard
//! by more than the release takes: leaving a scope, returning early with `?` or unwinding from a
//! panic frees the lock. A drop cannot report an error, and never blocks on a server that cannot
//! be reached (the release is tried again on a thread of the library until the lease ends); call
//! `release()` where the outcome matters. [`detach()`](Lock::detach) lets a guard go without
//! releasing the lock (see [owner tokens](#owner-tokens-handing-a-lock-over)).
//!
//! ```no_run
//! use std::time::Duration;
//! # let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
//! {
//!     let _lock = client.acquire("stock:42", Duration::from_secs(5))?;
//!     // ... the critical section ...
//! } // dropped here: released
//! # Ok::<(), redislock::Error>(())
//! ```
//!
//! ## Renewal threads
//!
//! Each held auto-renewed lock has its own renewal thread, taken from parked threads of earlier
//! locks; a thread parked for 30 s ends ([`IDLE_EXIT`]). A lock gets its thread 100 ms after the
//! grant (or at its first renewal, if sooner): until then one timer thread per client watches it,
//! so a short critical section costs no thread wake-up at all. Release wakes the lock's renewal
//! thread at once. Renewal threads do not each take a pooled connection: they hand their EXTEND to
//! one I/O thread that pipelines all that is due, so 10,000 locks renewing every second cost a few
//! round trips (see the repository's `BENCHMARKS.md`).
//!
//! [`max_renewed_locks`](ClientBuilder::max_renewed_locks) (default 4096) bounds them; an acquire
//! beyond it fails with [`LimitReached`](ErrorKind::LimitReached) before touching Redis (a waiter
//! holds no place while it waits; if the bound is full when it is handed the lock, it releases it
//! and fails the same way). A lock's place is given back when `release()` returns or the lock is
//! found lost. Before an operating-system limit would stop a renewal thread from starting
//! (`vm.max_map_count`: each thread takes up to four mappings; `kernel.pid_max`,
//! `kernel.threads-max`, `RLIMIT_NPROC`, the cgroup's `pids.max`: each is a task), an acquire fails
//! the same way, with a message that names the limit; on a machine with the default
//! `vm.max_map_count` of 65,530 that is about 15,000 renewed locks in one Rust process.
//! [`Client::stats`] counts renewal threads, renewals, late renewals and lost locks. Which threads
//! run when, and how many, is in `docs/operations.md`.
//!
//! ## Lost locks
//!
//! When renewal finds the key gone or holding another token, or cannot reach Redis before the lease
//! runs out, the lock is marked lost: [`is_lost()`](Lock::is_lost) is true,
//! [`is_held()`](Lock::is_held) false (no round trip), [`release()`](Lock::release) and
//! [`extend()`](Lock::extend) return [`NotHeld`](ErrorKind::NotHeld), and the renewal thread ends.
//!
//! [`lock.on_lost(|e| ...)`](Lock::on_lost) is called once when renewal (or an extend or release)
//! finds the lock lost, with the reason, on the thread that found it — usually a renewal thread: it
//! must not block and must not release or extend that lock; set a flag or send on a channel.
//!
//! ## Waiting
//!
//! [`try_acquire`](Client::try_acquire) makes one attempt. [`acquire(name, wait)`](Client::acquire)
//! waits up to `wait`: the waiter queues itself in Redis and blocks in `BLPOP` on its own list; the
//! holder's release script sets the key to the oldest live waiter's token and pushes the grant onto
//! that waiter's list. So a handoff costs one wake-up, waiters are served in arrival order, and
//! nobody starves. When no release comes (the holder vanished, or a foreign client released with a
//! plain `DEL`) a waiter re-checks after [`recheck_interval`](ClientBuilder::recheck_interval)
//! (default 1 s, jittered by 20%), and never later than the lock's remaining lifetime. Waiters
//! block on a pool of their own ([`max_waiters`](ClientBuilder::max_waiters)), so they never take
//! connections from releases and renewals. A waiter that dies while queued is skipped once its
//! queue entry runs out (its re-check interval plus 0.5 s); a release in that short window would
//! hand it the lock, which then expires after its lease.
//!
//! **Cancelling a wait.**
//! `let cancel = Cancel::new(); client.lock(name).cancel_on(&cancel).acquire(wait)`, and
//! `cancel.cancel()` from any thread ([`Cancel`], [`LockRequest::cancel_on`]): the waiting acquire
//! returns [`Cancelled`](ErrorKind::Cancelled) within about a round trip — the cancel pushes a mark
//! onto the waiter's own signal list, which wakes its BLPOP — leaving no queue entry and no lock
//! behind (a lock handed to it meanwhile is passed on).
//!
//! ## Fencing tokens
//!
//! With [`fencing(true)`](LockRequest::fencing) each grant of a name increments the counter
//! `{key}:fence` and returns it ([`Lock::fencing_token`]): every grant gets a strictly larger
//! number, takeovers after expiry included. Give it to the protected resource and have it refuse
//! writes with a smaller token than it has already seen; that keeps a paused, stale holder from
//! writing after its lease ran out. On a Sentinel group or a Cluster the token is ordered first by
//! the configuration epoch (raised by every failover) of the master that granted it, then by the
//! counter (`epoch × 2^48 + counter`; on Sentinel the counter alone before the first failover): a
//! master cut off from the others that still grants during a split brain gives smaller tokens
//! than the promoted one, so the resource refuses its holders once it has seen the new master's. What
//! happens to the counter when a server loses it is in `docs/guarantees.md`.
//!
//! A fenced guard's [`fence()`](Lock::fence) gives the [`Fence`] to hand to the resource (name,
//! token, epoch; ordered by the token). For a resource kept in Redis, [`FencedResource`] applies
//! the check itself: each write (`set`, `incr_by`, a script of yours) is one script that writes only
//! when the fence is not older than the resource's and advances it; an older one changes nothing
//! and fails with [`Error::is_stale`] (`examples/fenced_write.rs`).
//!
//! ## Held at least and at most so long
//!
//! [`at_least(d)`](LockRequest::at_least) keeps the name taken until `d` after the grant even if
//! the holder releases (or drops, or exits) sooner: the release leaves the key holding the token
//! until then, so a job that runs on several hosts at the same interval runs once per interval,
//! a host whose clock is a little behind finding the name still taken.
//! [`at_most(d)`](LockRequest::at_most) bounds a holder: renewal and [`extend`](Lock::extend)
//! never reach past `d` after the grant, and then the lock is reported lost
//! ([`LostReason::AtMost`](metrics::LostReason::AtMost)) and its key expires. Each is between
//! 1 ms and 30 days; `at_least` no longer than `at_most` (nor, without auto-renewal, than the
//! lease); otherwise the acquire fails with [`InvalidArgument`](ErrorKind::InvalidArgument),
//! holding nothing. Exclusive locks only, on every topology (Redlock too).
//!
//! ```no_run
//! use std::time::Duration;
//! # let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
//! // The nightly report: once a day across hosts, never running past an hour.
//! match client
//!     .lock("report:nightly")
//!     .at_least(Duration::from_secs(50))
//!     .at_most(Duration::from_secs(3600))
//!     .try_acquire()
//! {
//!     Ok(lock) => {
//!         // ... make the report ...
//!         lock.release()?; // the name stays taken until 50 s after the grant
//!     }
//!     Err(e) if e.is_held() => {} // another host runs it
//!     Err(e) => return Err(e),
//! }
//! # Ok::<(), redislock::Error>(())
//! ```
//!
//! ## Interop with the classic pattern
//!
//! A program that takes the same key with `SET key token NX PX ms` and releases with the
//! compare-and-delete script
//! (`if redis.call('get',KEYS[1]) == ARGV[1] then return redis.call('del',KEYS[1]) end return 0`)
//! excludes and is excluded by redislock. Such a release does not wake redislock waiters; they
//! notice at their next re-check.
//!
//! ## Owner tokens: handing a lock over
//!
//! [`lock.owner_token()`](Lock::owner_token) is the random value the lock's key holds;
//! [`lock.detach()`](Lock::detach) stops renewing the lock and lets its handle go without releasing
//! it, returning that token; and [`client.lock(name).restore(token)`](LockRequest::restore) gives a
//! handle for the lock held with that token (one round trip that also resets the lease), in any
//! process, for example a queued job that finishes the work and releases the lock.
//! [`client.lock(name).owner_token(t)`](LockRequest::owner_token) acquires with an owner token the
//! application chose (16 to 256 printable ASCII characters: [`MIN_OWNER_LEN`], [`MAX_OWNER_LEN`]).
//! An owner token is a bearer secret: whoever has it can release the lock; it never appears in
//! messages. [`Client::is_owned_by`] tells whether a lock is held with a given owner token, and
//! [`Client::force_release`] releases a lock whoever holds it (an operator's last resort for a
//! holder that is gone).
//!
//! ## Fork
//!
//! A client used in a child process after `fork()` notices the new pid and builds fresh pools and
//! renewal threads; it never touches the parent's sockets. A lock handle inherited across fork is
//! not the child's: it does not renew, `release`/`extend` fail with [`Forked`](ErrorKind::Forked),
//! and dropping it does nothing (the parent's lock stays held). Its calls in the child look at the
//! process before anything else, so none waits for what a thread of the parent (its renewal
//! thread, say) held at the fork.
//!
//! **Forking Rust programs** need nothing of their own: no `[patch]`, no feature, no call. The
//! library's locks and condition variables are the standard library's (on Linux a futex word
//! each, with no state kept anywhere else), so a forked child that uses a client waits and wakes
//! only on its own; threads of the parent that were parked at the fork leave nothing behind that
//! the child could trip over. `tests/fork_dependent.rs` builds a program that depends on the
//! crate by path, as yours does, and forks it many times while other threads hold, renew and
//! wait for locks; every child takes and releases locks with the inherited client and exits.
//! What a program's own threads hold at the fork (its own locks, a `Mutex` around the client) is
//! its own concern, as always after `fork()`.
//!
//! ## Timeouts
//!
//! Connect, read and write timeouts are set on every connection and pool checkout is bounded, so no
//! call blocks forever. When the reply to an acquire is lost to a timeout, the lock may have been
//! set with our token: redislock runs the compare-and-delete before reporting the error, and
//! otherwise the lease bounds it. A pooled connection dropped by the server (restart,
//! `CLIENT KILL`) is replaced and the call retried once, transparently.
//!
//! # Kinds of lock
//!
//! Besides the exclusive lock, three kinds, all from the same client, with the same options
//! (`lease`, `auto_renew`, `fencing`, `cancel_on`), the same guards' methods (`is_held`, `is_lost`,
//! `remaining`, `extend`, `on_lost`, `release`, release on drop) and the same rules for leases,
//! lost grants, timeouts and fork, on a single server, a Sentinel group or a Redis Cluster (a
//! `redlock://` client refuses them, see Redlock in `docs/topologies.md`):
//!
//! ```no_run
//! use std::time::Duration;
//! use redislock::Client;
//!
//! fn main() -> Result<(), redislock::Error> {
//!     let client = Client::open("redis://127.0.0.1:6379/")?;
//!     let wait = Duration::from_secs(5);
//!
//!     // Many readers or one writer.
//!     let doc = client.rw_lock("doc:7");
//!     let r = doc.read(wait)?;            // shared with other readers
//!     r.release()?;
//!     let w = doc.write(wait)?;           // alone
//!     let r = w.downgrade()?;             // now a reader, with no moment unlocked in between
//!     r.release()?;
//!
//!     // At most 3 renders at once; this one takes 2 of the 3 permits.
//!     let pdf = client.semaphore("pdf-renderers", 3);
//!     let permits = pdf.acquire(2, wait)?;
//!     permits.release()?;
//!
//!     // Both stock counters or neither, released together.
//!     let both = client.lock_all(&["stock:berlin:42", "stock:paris:42"]);
//!     let locks = both.acquire(wait)?;
//!     locks.release()?;
//!     Ok(())
//! }
//! ```
//!
//! The same kinds from C (through requests) and from PHP (`readLock`, `writeLock`, `semaphore`,
//! `lockAll`) are in `docs/c-api.md` and `bindings/php/README.md`.
//!
//! **Why `client.rw_lock(name)`** and not `client.lock(name).read()`: a read/write lock is an
//! object of its own, with shared grants, a downgrade and keys of its own, as [`std::sync::RwLock`]
//! stands beside [`Mutex`](std::sync::Mutex). Naming the kind once gives one request for both modes
//! (`doc.read(..)`, `doc.write(..)`, usable again and again), and each mode returns its own guard
//! type ([`ReadLock`], [`WriteLock`]), so a read grant cannot be downgraded or passed where a write
//! grant is needed; `client.lock(name)` keeps meaning the exclusive lock.
//!
//! ## Read/write locks
//!
//! - **Sharing.** Any number of readers, or one writer. Each reader has a lease of its own and,
//!   with auto-renewal, is renewed on its own (the renewal extends only that reader's lease), so a
//!   crashed reader holds the name only until its own lease runs out.
//! - **Fairness.** Waiters are served in arrival order. A reader is let in at once only while
//!   nobody waits: a reader that arrives after a waiting writer queues behind it, so a stream of
//!   readers never starves a writer. A release wakes exactly the waiters that can proceed: the
//!   writer at the head of the queue, or every reader at the head up to the next writer, each with
//!   one BLPOP wake-up (no polling). Waiters fall back to a re-check as exclusive waiters do, never
//!   later than the first holder's lease runs out.
//! - **Downgrade.** [`WriteLock::downgrade()`](WriteLock::downgrade) turns the write lock into a
//!   read lock in one script: the name is never free in between, and the readers waiting at the
//!   head are let in with it. There is no upgrade (two readers upgrading at once would deadlock):
//!   release and `write()`.
//! - **Interop.** The write lock of name N is the key N holding the writer's token, exactly the
//!   exclusive lock: a program using `SET N token NX PX` on N (or an exclusive redislock lock of N)
//!   excludes, and is excluded by, a writer. While readers hold N, the key N holds the text
//!   `redislock readers` with the expiry of the reader whose lease ends last; that program's
//!   `SET NX` fails, and `GET N` shows that text. Waiters of the exclusive lock and of the
//!   read/write lock of one name are in different queues: either learns of the other's release at
//!   its next re-check (at most `recheck_interval`), not at once.
//! - **Fencing.** Readers and writers of a name share the name's counter (`{N}:fence`, also the
//!   exclusive lock's). A writer's token is larger than that of every earlier grant of the name; a
//!   reader's token is larger than that of the writer before it and smaller than that of the writer
//!   after it. Readers that hold at once are not ordered among themselves, which is what a resource
//!   needs: reject a write carrying a smaller token than the largest it has seen.
//! - **Crashes and lost grants.** A reader or writer that dies holds the name until its lease runs
//!   out. Renewal marks a reader lost when its entry is gone or expired or the key no longer holds
//!   the readers' text, and a writer lost when the key no longer holds its token.
//!
//! ## Semaphores
//!
//! - [`client.semaphore(name, n)`](Client::semaphore) has `n` permits (1 to [`MAX_PERMITS`] =
//!   10,000); [`acquire(k, wait)`](SemaphoreRequest::acquire) and
//!   [`try_acquire(k)`](SemaphoreRequest::try_acquire) take `k` of them (1 to `n`) as one grant
//!   with its own lease and renewal ([`Permits`]). The first user of a name fixes `n` for as long
//!   as anything is held or waiting; a request that gives another `n` fails with
//!   [`InvalidArgument`](ErrorKind::InvalidArgument) saying how many the semaphore has. When
//!   nothing is held or waiting, nothing of it is left in Redis, and the next user may choose
//!   again.
//! - **Fairness.** Requests are granted strictly in arrival order: a request for `k` waits until
//!   `k` permits are free, and later requests, even for fewer, queue behind it. A release grants
//!   the requests at the head that now fit, each woken by one BLPOP.
//! - **Crashes.** A holder that dies keeps its permits until its lease runs out; then they count as
//!   free again, and a waiter notices no later than that lease's end.
//! - No fencing tokens: permits are not exclusive, so no single order would protect a resource.
//! - Where it lives: the key N is a sorted set of grants (`k:token`, scored by expiry in server
//!   milliseconds) plus `#n` recording the number of permits; a plain `SET N ... NX` client is kept
//!   out while the semaphore is in use.
//!
//! ## Sets of locks
//!
//! - [`client.lock_all(&names)`](Client::lock_all) takes the exclusive locks of all the names (1 to
//!   [`MAX_SET_NAMES`] = 256, no name twice) all or none, in one round trip (one script), and
//!   [`release()`](MultiLock::release) releases them together in one script. Each name is then an
//!   ordinary exclusive lock holding the set's token: exclusive locks and `SET NX PX` clients of
//!   any of the names are excluded as usual. With fencing, each name gets a token from its own
//!   counter ([`fencing_tokens()`](MultiLock::fencing_tokens),
//!   [`fencing_token(name)`](MultiLock::fencing_token)). One renewal thread renews the whole set;
//!   if any name is found lost, the set is lost, and its release reports `NotHeld` while still
//!   freeing the names it held.
//! - **Waiting holds nothing.** A set that finds a name held queues as an ordinary waiter of that
//!   name; when a release hands it the name, it takes the whole set if the others are free, or
//!   passes the name straight on (in the same script) and queues behind the next held one. So a set
//!   never holds some names while it waits for others, and sets never deadlock, whatever the order
//!   of their names. The price: a set waiting for busy names can be overtaken by single-name users
//!   of its other names; it is not served strictly in arrival order.
//! - **On one server** all names go into one script, whatever their cluster slots. **On a Redis
//!   Cluster** a script runs on one master, so a set's names must share one hash slot: give them
//!   one `{hash tag}` (`{order:7}:stock`, `{order:7}:payment`); a set whose names span slots is
//!   refused with an invalid-argument error before anything is sent. (Sets across slots would have
//!   to be taken one slot group at a time, in a fixed global order, each group atomic but not the
//!   whole set: not done.)
//!
//! ## Keys, and a name used as two kinds
//!
//! All keys a kind uses are in its name's cluster slot (the `{hash tag}` rules of the exclusive
//! lock) and named in each script's KEYS when known before the call:
//!
//! | kind | keys of name N |
//! |---|---|
//! | read/write lock | `N` (writer's token, or `redislock readers`), `{N}:rw:r` (readers: token → expiry), `{N}:rw:q`, `{N}:rw:s:<id>`, `{N}:rw:e:<id>` (queue, a waiter's signal list and liveness key), `{N}:fence` |
//! | semaphore | `N` (sorted set of grants), `{N}:sem:q`, `{N}:sem:s:<id>`, `{N}:sem:e:<id>` |
//! | set of locks | each name's exclusive-lock keys |
//!
//! Every key but the fencing counter goes when the last holder or waiter does (released, timed out,
//! cancelled or expired). A name in use as a semaphore and as a lock (exclusive, read/write or in a
//! set) at the same time is refused with `InvalidArgument` ("in use as another kind of lock"), as
//! is an exclusive `try_acquire` or `acquire` of a semaphore's (or a Redisson lock's) name. The
//! exclusive lock and the read/write lock of one name are one lock by design (above). The ACL
//! commands these kinds need beyond the exclusive lock's are listed with the least-privilege rule
//! in `docs/operations.md`, "Security".
//!
//! # Leader election
//!
//! [`client.leader(name)`](Client::leader) gives a [`LeaderRequest`]: with an
//! [`identity`](LeaderRequest::identity) (what observers see, never the token),
//! [`campaign(wait)`](LeaderRequest::campaign) waits to lead and
//! [`try_campaign()`](LeaderRequest::try_campaign) tries once. The [`Leadership`] it returns is a
//! fenced lock: its [`epoch()`](Leadership::epoch) is larger than every earlier leader's, so a
//! resource that refuses older epochs fences out a leader that was paused and replaced. It
//! renews while held, [`is_leader()`](Leadership::is_leader) turns false when it is lost
//! ([`on_lost`](Leadership::on_lost) says when), and [`resign()`](Leadership::resign) (or a
//! drop) hands leadership to the next candidate at once. Observers need not campaign:
//! [`Client::leader_info`] tells who leads now ([`LeaderInfo`]: identity, epoch, remaining
//! lease), and [`Client::wait_for_leader_change`] blocks until another epoch leads, woken by the
//! election's channel (or at the leader's remaining lease, when a leader dies), without polling.
//! On one server, a Sentinel group or a Cluster; not on Redlock URLs. More in `docs/leaders.md`.
//!
//! ```no_run
//! use std::time::Duration;
//! # let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
//! let leadership = client
//!     .leader("scheduler")
//!     .identity("host-a")
//!     .campaign(Duration::from_secs(60))?;
//! println!("leading with epoch {}", leadership.epoch());
//! while leadership.is_leader() {
//!     // ... one step of the leader's work, fenced with leadership.epoch() ...
//! #   break;
//! }
//! leadership.resign()?;
//! let now = client.leader_info("scheduler")?; // None: nobody leads
//! # let _ = now;
//! # Ok::<(), redislock::Error>(())
//! ```
//!
//! # Metrics
//!
//! [`client.metrics()`](Client::metrics) takes a [`Snapshot`](metrics::Snapshot) of the client's
//! backend: acquisitions by outcome, wait and hold times (histograms), handoffs, renewals (and
//! late ones), lost locks by reason, locks held and waiters now, connections and topology
//! events, labelled by kind of lock ([`KindLabel`](metrics::KindLabel)) and, for the names given
//! to [`ClientBuilder::metric_names`], by lock name.
//! [`to_prometheus()`](metrics::Snapshot::to_prometheus) gives the Prometheus text exposition;
//! [`get`](metrics::Snapshot::get) reads one value. With the cargo feature `metrics` every count
//! also goes to the `metrics` crate's installed recorder as it happens
//! (`metrics::describe()` gives it the help texts); with the feature `tracing`, acquires,
//! releases, renewals and lost locks are spans of the `tracing` crate. [`Client::stats`] keeps the
//! few counters of earlier versions. Every metric, and the alerting rules and dashboard that use
//! them, are in `docs/metrics.md`.
//!
//! ```no_run
//! # let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
//! let text = client.metrics().to_prometheus(); // serve it on /metrics
//! print!("{text}");
//! # Ok::<(), redislock::Error>(())
//! ```
//!
//! # Errors
//!
//! Every call returns `Result<_, redislock::Error>`; [`error.kind()`](Error::kind) tells the class
//! ([`ErrorKind`]), each with a predicate and, in C and PHP, its own result code and exception
//! class:
//!
//! | kind | C code | when |
//! |---|---|---|
//! | `Held` | `REDISLOCK_HELD` (1) | one attempt found the lock held by another owner |
//! | `WaitTimeout` | `REDISLOCK_WAIT_TIMEOUT` (2) | not granted within the wait bound |
//! | `NotHeld` | `REDISLOCK_NOT_HELD` (3) | release/extend: the lock was released already, expired, lost or taken over |
//! | `InvalidArgument` | `REDISLOCK_INVALID_ARGUMENT` (4) | empty or oversized name, zero or absurd lease, bad URL or setting |
//! | `Connection` | `REDISLOCK_CONNECTION` (5) | Redis unreachable, not answering in time (`is_timeout()` tells a timeout), or the peer does not speak Redis; also a write fewer replicas than `min_replicas` acknowledged |
//! | `Redis` | `REDISLOCK_REDIS_ERROR` (6) | Redis replied with an error (`NOPERM`, `READONLY`, ...); `redis_code()` has the code |
//! | `Forked` | `REDISLOCK_FORKED` (7) | a lock handle used in a child after `fork()` |
//! | `LimitReached` | `REDISLOCK_LIMIT_REACHED` (8) | `max_renewed_locks` auto-renewed locks are held already |
//! | `Internal` | `REDISLOCK_INTERNAL` (9) | a bug; please report it |
//! | `Cancelled` | `REDISLOCK_CANCELLED` (12) | a waiting acquire was cancelled through its `Cancel` handle |
//!
//! C adds `REDISLOCK_NULL_PARAMETER` (10), `REDISLOCK_PANIC` (11) and `REDISLOCK_STALE` (13), a
//! `NotHeld` that [`Error::is_stale`] tells (a fenced write refused). Messages name the lock and
//! the server, never the token or the password. [`Error::is_timeout`] and [`Error::redis_code`]
//! refine `Connection` and `Redis`; the PHP exception classes are listed in
//! `bindings/php/README.md`.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_code)]
#![warn(missing_docs)]

// The layers, from the top (ARCHITECTURE.md): no module imports from a layer above its own.
mod api;
mod base;
mod engine;
mod stores;
// The C ABI: its `#[unsafe(no_mangle)] extern "C"` functions are exported from the cdylib and
// staticlib whatever the module's visibility, and are not part of the Rust API.
#[allow(unsafe_code)]
mod ffi;

/// The metrics of a client's backend: [`Client::metrics`] takes a [`Snapshot`](metrics::Snapshot),
/// whose [`to_prometheus`](metrics::Snapshot::to_prometheus) gives the Prometheus text. Every
/// metric is listed in `docs/metrics.md`.
pub mod metrics {
    /// With the cargo feature `metrics`: describes every metric family to the `metrics`
    /// crate's installed recorder (help text, seconds for histograms). The counts themselves
    /// reach the recorder as they happen.
    #[cfg(feature = "metrics")]
    pub use crate::base::metrics::facade::describe_all as describe;
    pub use crate::base::metrics::{
        BUCKETS, Family, HistogramSnapshot, KindLabel, LostReason, MAX_TRACKED_NAMES, MetricType,
        Outcome, Sample, Snapshot, Value, error_label,
    };
    /// The former name of [`KindLabel`], beside `redislock::LockKind` (which kind of lock
    /// `Client::inspect` looks at).
    #[deprecated(since = "0.4.0", note = "renamed KindLabel")]
    pub type LockKind = KindLabel;
}

/// The internals the fuzz targets (`fuzz/`) reach, with the cargo feature `fuzzing`: no part of
/// the API, and no promise.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::base::connection::reply as parse_reply;
    /// The redis-rs the crate links, whose parser the RESP target compares with the crate's.
    pub use redis;
}

pub use api::builder::ClientBuilder;
pub use api::client::Client;
pub use api::fence::Fence;
pub use api::fenced::FencedResource;
pub use api::guard::{AnyLock, Guard};
pub use api::kinds as kind;
pub use api::kinds::exclusive::{Lock, LockRequest};
pub use api::kinds::leader::{LeaderRequest, Leadership};
pub use api::kinds::multi::{MultiLock, MultiLockRequest};
pub use api::kinds::redisson::{RedissonLock, RedissonLockRequest};
pub use api::kinds::rwlock::{ReadLock, RwLockRequest, WriteLock};
pub use api::kinds::semaphore::{Permits, SemaphoreRequest};
pub use api::request::Request;
pub use base::config::{MAX_LEASE, MAX_WAIT, MIN_RENEWED_LEASE};
pub use base::error::{Error, ErrorKind};
pub use base::inspect::LockInfo;
pub use base::keys::MAX_NAME_LEN;
pub use base::kind::{HeldAs, LockKind};
pub use base::token::{MAX_OWNER_LEN, MIN_OWNER_LEN};
pub use engine::backend::MAX_PERSISTENT_BACKENDS;
pub use engine::cancel::Cancel;
pub use engine::kinds::leader::{LeaderInfo, MAX_IDENTITY_LEN};
pub use engine::kinds::{MAX_PERMITS, MAX_SET_NAMES};
pub use engine::renewal::{IDLE_EXIT, Stats};

/// The README's Rust examples, compiled as doc tests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The Rust examples of `docs/topologies.md`, compiled as doc tests.
#[doc = include_str!("../docs/topologies.md")]
#[cfg(doctest)]
pub struct TopologiesDoctests;

/// The Rust examples of `docs/operations.md`, compiled as doc tests.
#[doc = include_str!("../docs/operations.md")]
#[cfg(doctest)]
pub struct OperationsDoctests;

/// The Rust examples of `docs/redisson.md`, compiled as doc tests.
#[doc = include_str!("../docs/redisson.md")]
#[cfg(doctest)]
pub struct RedissonDoctests;

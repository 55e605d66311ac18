//! [`FencedResource`]: writes to a key in Redis that apply only with a fence not older than the
//! resource's, checked and advanced by the server in the same script as the write.

use crate::api::client::Client;
use crate::api::fence::Fence;
use crate::base::error::Error;
use crate::base::keys::LockKeys;
use crate::base::scripts::{self, FENCED_INCR, FENCED_SET};
use crate::stores::Deployment;

/// A key in Redis written only with a fence (of [`fence()`](crate::Lock::fence)) not older than
/// the last one a write to it was applied with. The resource keeps that fence in the companion
/// key `{key}:fenced` (in the key's Cluster slot: the key's own hash tag if it has one, else the
/// whole key as the tag), and each write is one script that checks the fence, writes, and
/// advances the fence. A write with an older fence changes nothing and fails with
/// [`Error::is_stale`]: a later holder of the lock wrote since. An equal fence is the same
/// holder writing again, and applies.
///
/// The resource may live on the lock's server or any other: one server, a Sentinel group or a
/// Cluster (not Redlock's masters). The key is used as given, without the client's key prefix.
///
/// ```no_run
/// use redislock::{Client, FencedResource};
/// let client = Client::builder("redis://127.0.0.1:6379/").fencing(true).build()?;
/// let balance = FencedResource::open("redis://127.0.0.1:6379/", "account:7:balance")?;
/// let lock = client.try_acquire("account:7")?;
/// let fence = lock.fence().expect("a fenced lock");
/// balance.incr_by(&fence, 10)?; // Err(e) with e.is_stale(): a later holder wrote meanwhile
/// # Ok::<(), redislock::Error>(())
/// ```
#[derive(Clone)]
pub struct FencedResource {
    client: Client,
    keys: LockKeys,
}

/// What a fenced script answered: written (with its reply), or stale (with the stored fence).
enum Outcome<T> {
    Applied(T),
    Stale(String),
}

impl FencedResource {
    /// The resource `key` on the server (or Sentinel group, or Cluster) of `url`, in any of the
    /// URL forms [`Client::open`] takes but Redlock's. Connects on first use.
    pub fn open(url: &str, key: impl AsRef<[u8]>) -> Result<FencedResource, Error> {
        FencedResource::with_client(&Client::open(url)?, key)
    }

    /// The resource `key` on the servers of `client` (its connections and settings; not its key
    /// prefix).
    pub fn with_client(client: &Client, key: impl AsRef<[u8]>) -> Result<FencedResource, Error> {
        if let Deployment::Redlock(_) = client.deployment() {
            return Err(Error::invalid_argument(
                "a fenced resource lives on one server, a Sentinel group or a Cluster, \
                 not on Redlock's masters",
            ));
        }
        let keys = LockKeys::new(b"", key.as_ref()).map_err(|e| {
            e.reworded(
                "invalid argument: lock name",
                "invalid argument: resource key",
            )
        })?;
        Ok(FencedResource {
            client: client.clone(),
            keys,
        })
    }

    /// The resource's key.
    pub fn key(&self) -> &[u8] {
        self.keys.lock()
    }

    /// The key that holds the resource's fence: the largest token a write was applied with.
    pub fn fence_key(&self) -> Vec<u8> {
        self.keys.fenced()
    }

    /// The largest fencing token a write to the resource was applied with, if any (one round
    /// trip).
    pub fn current_fence(&self) -> Result<Option<u64>, Error> {
        let fence_key = self.keys.fenced();
        self.run(|c, _| redis::cmd("GET").arg(&fence_key).query(c))
    }

    /// Sets the resource to `value` if `fence` is not older than the resource's, and advances
    /// the resource's fence to it. A stale fence changes nothing: [`Error::is_stale`].
    pub fn set(&self, fence: &Fence, value: impl AsRef<[u8]>) -> Result<(), Error> {
        let fence_key = self.keys.fenced();
        // Safe to repeat on a dropped connection: the same token may write again.
        let outcome = self.run(|c, _| {
            FENCED_SET
                .key(self.keys.lock())
                .key(&fence_key)
                .arg(fence.token())
                .arg(value.as_ref())
                .invoke(c)
        })?;
        self.applied(fence, parse(outcome, |_| Ok(()))?)
    }

    /// Adds `n` to the resource's integer (0 when it has none) if `fence` is not older than the
    /// resource's, advances the resource's fence to it, and returns the new value. A stale fence
    /// changes nothing: [`Error::is_stale`].
    pub fn incr_by(&self, fence: &Fence, n: i64) -> Result<i64, Error> {
        let fence_key = self.keys.fenced();
        let outcome = self.run_once(|c| {
            FENCED_INCR
                .key(self.keys.lock())
                .key(&fence_key)
                .arg(fence.token())
                .arg(n)
                .invoke(c)
        })?;
        self.applied(
            fence,
            parse(outcome, |v| {
                v.and_then(|v| redis::from_redis_value(v).ok())
                    .ok_or_else(|| Error::internal("FENCED_INCR returned no value"))
            })?,
        )
    }

    /// Runs the caller's Lua `script` if `fence` is not older than the resource's, then advances
    /// the resource's fence to it, all in one script; returns the script's reply. The script sees
    /// the resource's key as `KEYS[1]`, then `keys`, and `args` as `ARGV`; on a Cluster every key
    /// must share the resource's slot (give them its hash tag). A stale fence runs nothing:
    /// [`Error::is_stale`]. A script that fails leaves the resource's fence as it was (what it
    /// wrote before failing stays, as with any Redis script).
    pub fn eval<T: redis::FromRedisValue>(
        &self,
        fence: &Fence,
        script: &str,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> Result<T, Error> {
        let fence_key = self.keys.fenced();
        let script = redis::Script::new(&scripts::fenced_eval(script));
        let outcome = self.run_once(|c| {
            let mut call = script.key(self.keys.lock());
            for k in keys {
                call.key(*k);
            }
            call.key(&fence_key);
            for a in args {
                call.arg(*a);
            }
            call.arg(fence.token()).invoke(c)
        })?;
        self.applied(
            fence,
            parse(outcome, |v| {
                redis::from_redis_value(v.unwrap_or(redis::Value::Nil)).map_err(|e| {
                    Error::invalid_argument(format!("the script's reply does not convert: {e}"))
                })
            })?,
        )
    }

    /// The value of an applied write, or the stale error.
    fn applied<T>(&self, fence: &Fence, outcome: Outcome<T>) -> Result<T, Error> {
        match outcome {
            Outcome::Applied(v) => Ok(v),
            Outcome::Stale(stored) => Err(Error::stale(
                &format!("resource {}", self.keys.shown()),
                fence.token(),
                &stored,
            )),
        }
    }

    /// Runs `op` on the server that holds the resource's key, repeated on a dropped connection.
    fn run<T>(
        &self,
        op: impl FnMut(&mut crate::base::connection::Connection, u32) -> redis::RedisResult<T>,
    ) -> Result<T, Error> {
        let b = self.client.backend()?;
        b.store.run(&self.keys, op)
    }

    /// Runs `op` once: a write that must not apply twice (an increment, a caller's script).
    /// When the connection drops after it was sent, whether it applied is unknown: a
    /// [connection error](Error::is_connection) that says so, never a second write.
    fn run_once<T>(
        &self,
        mut op: impl FnMut(&mut crate::base::connection::Connection) -> redis::RedisResult<T>,
    ) -> Result<T, Error> {
        let out = self.run(|c, attempt| {
            if attempt > 0 {
                return Ok(None);
            }
            op(c).map(Some)
        })?;
        out.ok_or_else(|| {
            Error::connection(
                &format!("resource {}", self.keys.shown()),
                "the connection dropped after the write was sent: whether it applied is unknown",
                false,
            )
        })
    }
}

/// A fenced script's reply: `{1, reply}` applied (the reply converted by `value`), or `{0,
/// fence}` stale.
fn parse<T>(
    reply: redis::Value,
    value: impl FnOnce(Option<redis::Value>) -> Result<T, Error>,
) -> Result<Outcome<T>, Error> {
    let redis::Value::Array(items) = reply else {
        return Err(Error::internal(format!("a fenced write replied {reply:?}")));
    };
    let mut items = items.into_iter();
    match (items.next(), items.next()) {
        (Some(redis::Value::Int(1)), v) => Ok(Outcome::Applied(value(v)?)),
        (Some(redis::Value::Int(0)), v) => {
            let stored: String = v
                .and_then(|v| redis::from_redis_value(v).ok())
                .unwrap_or_default();
            Ok(Outcome::Stale(stored))
        }
        (first, _) => Err(Error::internal(format!(
            "a fenced write replied {first:?} first"
        ))),
    }
}

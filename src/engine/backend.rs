//! What a client runs on in one process, and who keeps it running.
//!
//! A [`Backend`] holds a client's connection pools and renewal threads for one process. It is
//! kept running by [`Owner`]s: the client holds one, and so does every lock taken through it, so
//! a lock stays usable after its client is freed. When the last owner is dropped, the backend's
//! threads are stopped and joined, and its connections closed: nothing of a freed client keeps
//! running.
//!
//! A *persistent* client (the habit of phpredis' `pconnect`) instead shares a process-wide
//! backend with every other persistent client of the same server and connection settings. That
//! backend is owned by the process itself and lives until the process exits, so a program (a
//! PHP-FPM worker) that makes a client for every request connects and starts threads only once.
//!
//! Backends belong to the process that built them. After `fork()` the child builds its own; an
//! owner inherited across fork forgets the parent's backend without running any of its
//! destructors (its sockets are the parent's, its threads and lock holders do not exist here).

use std::ops::Deref;
use std::sync::Arc;

use crate::base::sync::{Mutex, PerProcess};

use crate::base::config::Config;
use crate::base::error::Error;
use crate::base::metrics::Metrics;
use crate::engine::renewal::Renewer;
use crate::stores::{self, Deployment, LockStore};

/// The most persistent backends one process keeps (one per distinct server and connection
/// settings); a persistent client beyond them is refused.
pub const MAX_PERSISTENT_BACKENDS: usize = 64;

/// Connection pools and renewal threads of a client in one process.
pub(crate) struct Backend {
    pub pid: u32,
    /// The client's id in this process (a UUID), for the kinds that record their holder as a
    /// client and a thread.
    pub id: String,
    /// Where the locks live: every call to Redis about a lock goes through it.
    pub store: Box<dyn LockStore>,
    pub renewer: Renewer,
    /// Its metrics (its store and pools count into the same): every client sharing this
    /// backend shares them.
    pub metrics: Arc<Metrics>,
}

/// Keeps a backend running. Held by a client, by each lock taken through it, and for persistent
/// backends by the process-wide registry; the last one to go stops the backend's threads.
pub(crate) struct Owner {
    backend: Option<Arc<Backend>>,
}

impl Owner {
    /// Builds a backend for this process. Starts no thread and opens no connection yet.
    pub(crate) fn start(
        cfg: &Config,
        info: &redis::ConnectionInfo,
        deployment: &Deployment,
    ) -> Result<Arc<Owner>, Error> {
        let metrics = Arc::new(Metrics::new(&cfg.metric_names));
        let backend = Backend {
            pid: std::process::id(),
            id: crate::base::token::random_uuid(std::process::id())?,
            store: stores::open(cfg, info, deployment, &metrics)?,
            renewer: Renewer::new(cfg.max_renewed_locks),
            metrics,
        };
        Ok(Arc::new(Owner {
            backend: Some(Arc::new(backend)),
        }))
    }

    /// The shared backend of persistent clients with this configuration's server and
    /// connection settings, built on first use in this process.
    pub(crate) fn persistent(
        cfg: &Config,
        info: &redis::ConnectionInfo,
        deployment: &Deployment,
    ) -> Result<Arc<Owner>, Error> {
        // This process's own registry: a forked child starts with an empty one, and never
        // takes the lock of its parent's, which a thread of the parent may have held at the fork.
        let mut registry = PERSISTENT.of(std::process::id()).lock();
        if let Some(found) = registry.iter().find(|o| o.store.cfg().same_backend(cfg)) {
            return Ok(found.clone());
        }
        if registry.len() >= MAX_PERSISTENT_BACKENDS {
            return Err(Error::limit(format!(
                "{MAX_PERSISTENT_BACKENDS} persistent clients with different servers or \
                 connection settings exist in this process already; reuse one, or make this \
                 client private (persistent off)"
            )));
        }
        let owner = Owner::start(cfg, info, deployment)?;
        registry.push(owner.clone());
        Ok(owner)
    }

    /// The backend itself, for what outlives no handle (a lock's renewal state).
    pub(crate) fn backend(&self) -> &Arc<Backend> {
        self.backend
            .as_ref()
            .expect("an owner holds its backend until dropped")
    }
}

impl Deref for Owner {
    type Target = Backend;
    fn deref(&self) -> &Backend {
        self.backend()
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        let Some(backend) = self.backend.take() else {
            return;
        };
        if backend.pid != std::process::id() {
            // Inherited across fork: never run the parent's destructors in this process.
            std::mem::forget(backend);
            return;
        }
        // No client and no lock of this backend is left, so nothing is held through it: its
        // threads end at once, but one may be in the middle of a round trip.
        let bound = backend.store.cfg().read_timeout + backend.store.cfg().write_timeout;
        backend.renewer.shutdown(bound);
    }
}

/// The backends of persistent clients, of each process.
static PERSISTENT: PerProcess<Mutex<Vec<Arc<Owner>>>> = PerProcess::new();

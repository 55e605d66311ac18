//! The slot table of a Redis Cluster (which master serves which of the 16384 hash slots): read
//! with `CLUSTER SLOTS`, kept, pointed at a slot's new master on `MOVED`, and read again when a
//! call asks for it (when: see `mod.rs`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Addr, Cluster};
use crate::base::error::Error;
use crate::base::url::hosts;
use crate::stores::{Node, connect_node};

/// Hash slots of a Redis Cluster.
const SLOTS: usize = 16384;
/// A slot that no master of the table serves.
const UNSERVED: u16 = u16::MAX;
/// The longest one node may take to answer `CLUSTER SLOTS` during a refresh: a paused node must
/// not take the whole refresh's time.
const ASK_TIMEOUT: Duration = Duration::from_millis(500);
/// Refreshes come no closer together than this: a failing master makes every call on its slots
/// ask for one, and a burst of them needs only the first.
const MIN_REFRESH_INTERVAL: Duration = Duration::from_millis(100);

/// Slots `first..=last` served by the master at an address.
type SlotRange = (u16, u16, Addr);

/// The last reading of the table.
#[derive(Default)]
pub(super) struct Refreshed {
    /// When it ended (None: never tried).
    at: Option<Instant>,
    /// Why it failed, if it did: told to callers that come before the next reading.
    failure: Option<Error>,
}

/// The slot table: for each slot, the index of its master in `masters`.
#[derive(Default)]
pub(super) struct Table {
    /// Empty until first read.
    slots: Vec<u16>,
    masters: Vec<SlotOwner>,
}

struct SlotOwner {
    addr: Addr,
    node: Arc<Node>,
}

impl Table {
    pub(super) fn node(&self, slot: u16) -> Option<&Arc<Node>> {
        let i = *self.slots.get(usize::from(slot))?;
        self.masters.get(usize::from(i)).map(|m| &m.node)
    }

    /// Whether the table names a master for `slot`, and another than `node`.
    pub(super) fn names_another(&self, slot: u16, node: &Arc<Node>) -> bool {
        self.node(slot).is_some_and(|n| !Arc::ptr_eq(n, node))
    }

    /// The node of the master at `addr`, if the table names it.
    pub(super) fn master_at(&self, addr: &Addr) -> Option<&Arc<Node>> {
        self.position(addr).map(|i| &self.masters[i].node)
    }

    fn position(&self, addr: &Addr) -> Option<usize> {
        self.masters.iter().position(|m| &m.addr == addr)
    }
}

impl Cluster {
    /// The master that serves `slot`, reading the table first if it knows none.
    pub(crate) fn node_for(&self, slot: u16) -> Result<Arc<Node>, Error> {
        if let Some(node) = self.table.read().node(slot) {
            return Ok(node.clone());
        }
        self.refresh(Instant::now(), None, None)?;
        self.table.read().node(slot).cloned().ok_or_else(|| {
            Error::connection(
                &self.cfg.server,
                format!(
                    "no master serves hash slot {slot} (is the cluster still forming, or down?)"
                ),
                false,
            )
        })
    }

    /// A MOVED reply: `slot` lives on `addr` now. The table says so at once, and is read again
    /// (a slot rarely moves alone).
    pub(crate) fn moved(&self, slot: u16, addr: &Addr) -> Result<(), Error> {
        let asked = Instant::now();
        {
            let mut t = self.table.write();
            let i = match t.position(addr) {
                Some(i) => i,
                None => {
                    let node = self.make_node(addr)?;
                    t.masters.push(SlotOwner {
                        addr: addr.clone(),
                        node,
                    });
                    t.masters.len() - 1
                }
            };
            if t.slots.is_empty() {
                t.slots = vec![UNSERVED; SLOTS];
            }
            t.slots[usize::from(slot)] = i as u16;
        }
        log::info!(
            "cluster hash slot {slot} moved to {}:{}: following it",
            addr.0,
            addr.1
        );
        // Best effort: the slot itself is known now.
        let _ = self.refresh(asked, Some(addr), None);
        Ok(())
    }

    /// Reads the slot table again, unless it was read since `asked` or very recently. Asks
    /// `prefer` first, then the masters of the table other than `avoid`, then the URL's nodes.
    pub(crate) fn refresh(
        &self,
        asked: Instant,
        prefer: Option<&Addr>,
        avoid: Option<&Arc<Node>>,
    ) -> Result<(), Error> {
        let budget = self.cfg.connect_timeout;
        let Some(mut last) = self.refreshed.try_lock_for(budget) else {
            // Another call has been reading the table for the whole budget: go on with the
            // table as it is.
            return Ok(());
        };
        if let Some(at) = last.at
            && (at >= asked || at.elapsed() < MIN_REFRESH_INTERVAL)
        {
            return last.failure.clone().map_or(Ok(()), Err);
        }
        let mut candidates: Vec<Addr> = prefer.into_iter().cloned().collect();
        {
            let t = self.table.read();
            for m in &t.masters {
                if !avoid.is_some_and(|a| Arc::ptr_eq(a, &m.node)) {
                    candidates.push(m.addr.clone());
                }
            }
        }
        candidates.extend(self.spec.seeds.iter().cloned());
        let mut seen = Vec::with_capacity(candidates.len());
        candidates.retain(|a| {
            let new = !seen.contains(a);
            seen.push(a.clone());
            new
        });
        let deadline = Instant::now() + budget;
        let mut failures = Vec::new();
        let result =
            loop {
                let Some(addr) = candidates.first().cloned() else {
                    break Err(failures.join("; "));
                };
                candidates.remove(0);
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    failures.push("out of time".to_owned());
                    break Err(failures.join("; "));
                }
                match self.ask_slots(&addr, left.min(ASK_TIMEOUT)) {
                Ok(ranges) if !ranges.is_empty() => {
                    break self.install(ranges).map_err(|e| e.to_string());
                }
                Ok(_) => failures.push(format!("{}:{} serves no slots yet", addr.0, addr.1)),
                // A server without cluster support says so: the URL names no Cluster.
                Err(e) if e.detail().is_some_and(|d| d.contains("cluster support disabled")) => {
                    failures.push(format!(
                        "{}:{} is not in cluster mode ({}): a redis-cluster:// URL needs Cluster \
                         nodes; a single server takes a redis:// URL",
                        addr.0,
                        addr.1,
                        e.detail().unwrap_or_default()
                    ))
                }
                Err(e) => failures.push(format!("{}:{}: {e}", addr.0, addr.1)),
            }
            };
        let result = result.map_err(|detail| {
            Error::connection(
                &self.cfg.server,
                format!("no node told the cluster's slots ({detail})"),
                false,
            )
        });
        last.at = Some(Instant::now());
        last.failure = result.as_ref().err().cloned();
        result
    }

    /// One node's `CLUSTER SLOTS`: (first slot, last slot, master address) ranges.
    fn ask_slots(&self, addr: &Addr, timeout: Duration) -> redis::RedisResult<Vec<SlotRange>> {
        let timeout = timeout.max(Duration::from_millis(1));
        let mut con = connect_node(&self.cfg, &self.template, addr, timeout)?;
        con.set_read_timeout(Some(timeout))?;
        con.set_write_timeout(Some(timeout))?;
        let reply: redis::Value = redis::cmd("CLUSTER").arg("SLOTS").query(&mut con)?;
        Ok(parse_slots(reply, addr))
    }

    /// Makes `ranges` the table, keeping the nodes (and their pools) of masters it names again.
    fn install(&self, ranges: Vec<SlotRange>) -> Result<(), Error> {
        let mut t = self.table.write();
        let mut masters: Vec<SlotOwner> = Vec::new();
        let mut slots = vec![UNSERVED; SLOTS];
        for (first, last, addr) in ranges {
            let i = match masters.iter().position(|m| m.addr == addr) {
                Some(i) => i,
                None => {
                    let node = match t.position(&addr) {
                        Some(old) => t.masters[old].node.clone(),
                        None => self.make_node(&addr)?,
                    };
                    masters.push(SlotOwner { addr, node });
                    masters.len() - 1
                }
            };
            for slot in first..=last {
                slots[usize::from(slot)] = i as u16;
            }
        }
        let before: Vec<&Addr> = t.masters.iter().map(|m| &m.addr).collect();
        let after: Vec<&Addr> = masters.iter().map(|m| &m.addr).collect();
        if !t.slots.is_empty() && before != after {
            let shown: Vec<String> = after.iter().map(|(h, p)| format!("{h}:{p}")).collect();
            log::info!(
                "cluster {}: masters now {}",
                hosts(&self.spec.seeds),
                shown.join(",")
            );
        }
        *t = Table { slots, masters };
        Ok(())
    }
}

/// The ranges of a `CLUSTER SLOTS` reply: `[[first, last, [host, port, id, ...], replicas...],
/// ...]`. A master without a known address (an empty host) is the node asked, `asked`.
fn parse_slots(reply: redis::Value, asked: &Addr) -> Vec<SlotRange> {
    use redis::Value as V;
    let V::Array(entries) = reply else {
        return Vec::new();
    };
    let mut ranges = Vec::new();
    for entry in entries {
        let V::Array(fields) = entry else { continue };
        let (Some(V::Int(first)), Some(V::Int(last)), Some(V::Array(master))) =
            (fields.first(), fields.get(1), fields.get(2))
        else {
            continue;
        };
        let host = match master.first() {
            Some(V::BulkString(h)) => String::from_utf8_lossy(h).into_owned(),
            Some(V::SimpleString(h)) => h.clone(),
            _ => continue,
        };
        let Some(V::Int(port)) = master.get(1) else {
            continue;
        };
        let (Ok(first), Ok(last), Ok(port)) = (
            u16::try_from(*first),
            u16::try_from(*last),
            u16::try_from(*port),
        ) else {
            continue;
        };
        if first > last || usize::from(last) >= SLOTS || host == "?" {
            continue;
        }
        let host = if host.is_empty() {
            asked.0.clone()
        } else {
            host
        };
        ranges.push((first, last, (host, port)));
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value as V;

    fn bulk(s: &str) -> V {
        V::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn slots_reply_is_parsed() {
        let reply = V::Array(vec![
            V::Array(vec![
                V::Int(0),
                V::Int(5460),
                V::Array(vec![bulk("127.0.0.1"), V::Int(7000), bulk("id0")]),
                V::Array(vec![bulk("127.0.0.1"), V::Int(7003), bulk("id3")]),
            ]),
            V::Array(vec![
                V::Int(5461),
                V::Int(10922),
                V::Array(vec![bulk(""), V::Int(7001), bulk("id1")]),
            ]),
            // Not usable: unknown endpoint, slot out of range, wrong shape.
            V::Array(vec![
                V::Int(10923),
                V::Int(16383),
                V::Array(vec![bulk("?"), V::Int(7002)]),
            ]),
            V::Array(vec![
                V::Int(10923),
                V::Int(16384),
                V::Array(vec![bulk("h"), V::Int(7002)]),
            ]),
            V::Int(3),
        ]);
        let asked = ("10.0.0.1".to_owned(), 7001);
        assert_eq!(
            parse_slots(reply, &asked),
            vec![
                (0, 5460, ("127.0.0.1".to_owned(), 7000)),
                (5461, 10922, ("10.0.0.1".to_owned(), 7001)),
            ]
        );
        assert!(parse_slots(V::Nil, &asked).is_empty());
    }
}

//! A look at a Redlock lock without holding it: GET and PTTL on every master; held when a
//! majority names the same owner.

use super::Masters;
use super::round::{Answer, Part, reply_value};
use crate::base::error::Error;
use crate::base::inspect::LockInfo;
use crate::base::keys::LockKeys;
use crate::base::kind::HeldAs;
use crate::stores::inspect::remaining;

impl Masters {
    /// The lock as a majority of masters see it: held when a majority hold the same token (which
    /// is compared here and never returned), its remaining lease the shortest among the
    /// majority that lasts longest. An error when too few masters answered to tell.
    pub(crate) fn inspect(&self, keys: &LockKeys) -> Result<LockInfo, Error> {
        let mut packed = redis::cmd("GET").arg(keys.lock()).get_packed_command();
        packed.extend(redis::cmd("PTTL").arg(keys.lock()).get_packed_command());
        let build = |_: usize, _: bool| Part {
            packed: packed.clone(),
            replies: 2,
            script: None,
        };
        let answers = self.round(&self.all(), &build, &|_| false);
        // Each owner seen, with the PTTL of its key on each master that holds it.
        let mut owners: Vec<(Vec<u8>, Vec<i64>)> = Vec::new();
        let mut failed = Vec::new();
        for (i, a) in answers.into_iter().enumerate() {
            let values = match a {
                Some(Answer::Replies(values)) if values.len() == 2 => values,
                Some(Answer::Replies(_)) => {
                    failed.push((i, Error::internal("a reply is missing")));
                    continue;
                }
                Some(Answer::Failed { error, .. }) => {
                    failed.push((i, error));
                    continue;
                }
                None => continue,
            };
            let read = reply_value::<Option<Vec<u8>>>(&values[0])
                .and_then(|t| Ok((t, reply_value::<i64>(&values[1])?)));
            match read {
                Ok((Some(t), pttl)) if pttl != -2 => {
                    match owners.iter_mut().find(|(k, _)| *k == t) {
                        Some((_, ttls)) => ttls.push(pttl),
                        None => owners.push((t, vec![pttl])),
                    }
                }
                Ok(_) => {}
                Err(e) => failed.push((i, Error::from_redis(self.server(i), &e))),
            }
        }
        let q = self.quorum();
        let best = owners.into_iter().map(|(_, t)| t).max_by_key(Vec::len);
        let free = LockInfo {
            held: false,
            held_as: None,
            holders: 0,
            permits_held: 0,
            permits: None,
            remaining: None,
            waiters: None,
            fencing_counter: None,
        };
        match best {
            Some(mut ttls) if ttls.len() >= q => {
                // No expiry (-1) lasts longest; the majority's shortest is the q-th longest.
                ttls.sort_by_key(|&t| std::cmp::Reverse(if t < 0 { i64::MAX } else { t }));
                let pttl = ttls[q - 1];
                Ok(LockInfo {
                    held: true,
                    held_as: Some(HeldAs::Exclusive),
                    holders: 1,
                    remaining: remaining(true, pttl),
                    ..free
                })
            }
            best if best.as_ref().map_or(0, Vec::len) + failed.len() >= q && !failed.is_empty() => {
                Err(self.op_error(
                    &format!(
                        "lock {} cannot be inspected: too few of {} masters answered",
                        keys.shown(),
                        self.masters.len()
                    ),
                    &failed,
                ))
            }
            _ => Ok(free),
        }
    }
}

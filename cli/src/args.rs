//! The command line: every subcommand and option, with its help. The man page and the shell
//! completions are generated from the same definitions (`redislock man`, `redislock completions`).

use std::time::Duration;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand, ValueEnum};
use redislock::LockKind;

const AFTER_HELP: &str = "Examples, exit statuses and environment: redislock --help";

/// Runs commands under a distributed lock held in Redis: flock(1) across hosts.
///
/// `redislock run NAME -- COMMAND` waits for the lock NAME, runs COMMAND while holding it
/// (renewed automatically), releases it when COMMAND ends and exits with COMMAND's status.
/// The lock lives in Redis: one server, a Sentinel group, a Cluster or Redlock's masters.
#[derive(Debug, Parser)]
#[command(
    name = "redislock",
    version,
    after_help = AFTER_HELP,
    after_long_help = AFTER_LONG_HELP,
)]
pub struct Cli {
    #[command(flatten)]
    pub conn: Connection,
    #[command(subcommand)]
    pub command: Command,
}

/// After the options in `--help` and the man page: examples, exit statuses, environment.
pub const AFTER_LONG_HELP: &str = concat!(
    "Examples:\n",
    "  redislock --url redis://db.internal:6379/0 run nightly-backup -- /usr/local/bin/backup.sh\n",
    "  redislock run --no-wait report -- ./make-report            # exit 75 if held\n",
    "  redislock run --permits 1/3 pdf -- ./render                # at most 3 at once\n",
    "  redislock run --read config -- ./read-config\n",
    "  redislock run --redisson orders -- ./settle   # excludes Java's Redisson RLock \"orders\"\n",
    "  export REDISLOCK_OWNER_TOKEN=$(redislock acquire --lease 10m migrate)\n",
    "  redislock extend migrate 10m; redislock release migrate\n",
    "  redislock status nightly-backup\n",
    "  redislock elect scheduler --id \"$(hostname)\" -- ./scheduler   # one leader at a time\n",
    "  redislock leader --watch scheduler\n",
    "  redislock run --fencing orders -- sh -c 'redislock fenced incr orders:count'\n",
    "\n",
    "Exit statuses:\n",
    "  (the command's)  run: the command's own exit status\n",
    "  128+N            run: the command was killed by signal N (130: SIGINT while waiting)\n",
    "  0                success; status: the lock is held; leader: someone leads\n",
    "  1                status: the lock is free; leader: nobody leads\n",
    "  64               bad usage (EX_USAGE)\n",
    "  69               Redis unreachable, not Redis, or failing (EX_UNAVAILABLE)\n",
    "  70               internal error (EX_SOFTWARE)\n",
    "  75               not acquired within --wait, or held with --no-wait (EX_TEMPFAIL)\n",
    "  76               run, elect: the lock (leadership) was lost while the command ran;\n",
    "                   extend, release: the lock is not held with this token any more\n",
    "  77               fenced: the write was refused as stale, a later fencing token wrote\n",
    "                   since; nothing was written (EX_NOPERM)\n",
    "  78               bad URL, option or password; the name is in use as another kind\n",
    "                   of lock (EX_CONFIG)\n",
    "  126              run: the command cannot be run\n",
    "  127              run: the command is not found\n",
    "\n",
    "Environment:\n",
    "  REDIS_URL              the URL when --url is not given\n",
    "  REDISLOCK_PASSWORD     the password, overriding the URL's (keeps it off the command line)\n",
    "  REDISLOCK_OWNER_TOKEN  the owner token for extend and release (else read from stdin)\n",
    "  REDISLOCK_FENCING_TOKEN  the fencing token for fenced set and incr (run --fencing sets it)\n",
    "\n",
    "Durations: 500ms, 30s, 2m, 1h, 1d (a bare number is seconds; 1.5s works). See also\n",
    "`redislock man`."
);

/// Where Redis is, and how long a call to it may take.
#[derive(Debug, Args)]
pub struct Connection {
    /// Redis URL: redis://, rediss://, unix://, redis-sentinel://, redis-cluster://, redlock://
    #[arg(
        long,
        env = "REDIS_URL",
        global = true,
        value_name = "URL",
        default_value = "redis://127.0.0.1:6379/",
        hide_env_values = true
    )]
    pub url: String,
    /// How long connecting to Redis, and each call, may take
    #[arg(long, global = true, value_name = "DURATION", default_value = "2s",
          value_parser = parse_duration)]
    pub timeout: Duration,
    /// How long a release (or extend) keeps trying while Redis cannot be reached, as during a
    /// Sentinel or Cluster failover (never past the lease)
    #[arg(long, global = true, value_name = "DURATION", default_value = "10s",
          value_parser = parse_duration)]
    pub release_timeout: Duration,
    /// Key prefix of the lock keys
    #[arg(long, global = true, value_name = "PREFIX", default_value = "")]
    pub prefix: String,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Acquire NAME, run COMMAND with the lock held (auto-renewed), release it, exit with
    /// COMMAND's status
    #[command(
        after_help = "Examples:\n  redislock run nightly-backup -- /usr/local/bin/backup.sh\n  redislock run --no-wait --lease 1m report -- sh -c './a && ./b'\n  redislock run --no-wait --at-least 50s --at-most 10m every-minute -- ./job.sh"
    )]
    Run(RunArgs),
    /// Acquire NAME with a fixed lease (no renewal) and print its owner token
    #[command(
        after_help = "Example:\n  export REDISLOCK_OWNER_TOKEN=$(redislock acquire --lease 10m migrate)"
    )]
    Acquire(AcquireArgs),
    /// Reset the lease of NAME, held with the owner token from REDISLOCK_OWNER_TOKEN or stdin
    Extend(ExtendArgs),
    /// Release NAME, held with the owner token from REDISLOCK_OWNER_TOKEN or stdin
    Release(ReleaseArgs),
    /// Show whether NAME is held, as what, by how many, for how long yet, and its waiters
    /// (exit 0 held, 1 free)
    Status(StatusArgs),
    /// Campaign to lead the election NAME under --id, run COMMAND while leader (its epoch in
    /// REDISLOCK_EPOCH), resign when COMMAND ends, exit with COMMAND's status
    #[command(
        after_help = "Example:\n  redislock elect scheduler --id \"$(hostname)\" -- ./scheduler"
    )]
    Elect(ElectArgs),
    /// Show who leads the election NAME: identity, epoch, remaining lease (exit 0 led, 1
    /// nobody); with --watch, print each change
    Leader(LeaderArgs),
    /// Write to a key with the fencing token of `run --fencing` (REDISLOCK_FENCING_TOKEN):
    /// refused, exit 77, when a later token wrote to it since
    #[command(
        after_help = "Example:\n  redislock run --fencing orders -- sh -c 'redislock fenced set orders:last \"$(date +%s)\"'"
    )]
    Fenced(FencedArgs),
    /// Print the man page (roff) of redislock, or of one of its commands, on standard output
    #[command(
        after_help = "Example:\n  redislock man > redislock.1; redislock man run > redislock-run.1"
    )]
    Man {
        /// The command whose page to print (run, acquire, extend, release, status, elect, leader,
        /// fenced)
        command: Option<String>,
    },
    /// Print the completion script of SHELL on standard output
    #[command(
        after_help = "Example:\n  redislock completions bash > /etc/bash_completion.d/redislock"
    )]
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// How long to wait for a lock.
#[derive(Debug, Args)]
#[group(multiple = false)]
pub struct Wait {
    /// Wait at most this long for the lock (default: without a bound)
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub wait: Option<Duration>,
    /// Fail at once (exit 75) if the lock is held
    #[arg(long, short = 'n')]
    pub no_wait: bool,
}

/// Which kind of lock `run` takes: a flag per kind, each named in its descriptor (`cli_flag`).
#[derive(Debug, Default, Args)]
#[group(multiple = false)]
pub struct KindFlags {
    /// Take the read side of the read/write lock NAME (shared with other readers)
    #[arg(long)]
    pub read: bool,
    /// Take the write side of the read/write lock NAME
    #[arg(long)]
    pub write: bool,
    /// Take TAKE permits of the semaphore NAME of TOTAL permits
    #[arg(long, value_name = "TAKE/TOTAL", value_parser = parse_permits)]
    pub permits: Option<(u32, u32)>,
    /// Take NAME as Redisson's RLock does, shared with Java services that lock NAME with Redisson
    /// (docs/redisson.md; not on Redlock URLs, no fencing)
    #[arg(long)]
    pub redisson: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub wait: Wait,
    #[command(flatten)]
    pub kind: KindFlags,
    /// The lease, renewed every third of it while COMMAND runs
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub lease: Duration,
    /// Give COMMAND a fencing token in REDISLOCK_FENCING_TOKEN
    #[arg(long)]
    pub fencing: bool,
    /// Keep NAME held at least this long after it was acquired, even when COMMAND ends sooner
    /// (the key keeps the lock until then; nothing stays running): a job on several hosts runs
    /// once per interval. Exclusive locks only
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub at_least: Option<Duration>,
    /// Hold NAME at most this long: renewal stops then, and COMMAND is treated as for a lost lock
    /// (SIGTERM, then SIGKILL after --kill-after; redislock exits 76). Exclusive locks only
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub at_most: Option<Duration>,
    #[command(flatten)]
    pub supervise: Supervise,
    /// The lock's name
    pub name: String,
    /// The command and its arguments (after --)
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<std::ffi::OsString>,
    /// `elect`: the identity to campaign with (the lock is then the election's leadership)
    #[arg(skip)]
    pub identity: Option<String>,
}

/// How `run` and `elect` stop COMMAND.
#[derive(Debug, Args)]
pub struct Supervise {
    /// What COMMAND gets if the lock (for `elect`, the leadership) is lost while it runs
    /// (redislock then exits 76)
    #[arg(long, value_enum, default_value_t = OnLost::Term, value_name = "ACTION")]
    pub on_lost: OnLost,
    /// After forwarding SIGINT, SIGTERM or SIGHUP (or SIGTERM for a lost lock), send SIGKILL
    /// if COMMAND still runs this long after
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub kill_after: Duration,
}

#[derive(Debug, Args)]
pub struct ElectArgs {
    #[command(flatten)]
    pub wait: Wait,
    /// The identity observers see (`redislock leader NAME`): UTF-8, 1 to 256 bytes
    #[arg(long, value_name = "ID")]
    pub id: String,
    /// The lease, renewed every third of it while COMMAND runs: how long a leader that dies
    /// keeps the others waiting
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub lease: Duration,
    #[command(flatten)]
    pub supervise: Supervise,
    /// The election's name
    pub name: String,
    /// The command and its arguments (after --)
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<std::ffi::OsString>,
}

impl ElectArgs {
    /// `run`'s arguments for the leadership of the election.
    pub fn into_run(self) -> RunArgs {
        RunArgs {
            wait: self.wait,
            kind: KindFlags::default(),
            lease: self.lease,
            fencing: false,
            at_least: None,
            at_most: None,
            supervise: self.supervise,
            name: self.name,
            command: self.command,
            identity: Some(self.id),
        }
    }
}

#[derive(Debug, Args)]
pub struct LeaderArgs {
    /// Print JSON objects (one per line with --watch) instead of lines
    #[arg(long)]
    pub json: bool,
    /// Print who leads now, then each change, until interrupted
    #[arg(long)]
    pub watch: bool,
    /// The election's name
    pub name: String,
}

#[derive(Debug, Args)]
pub struct FencedArgs {
    /// The fencing token to write with (default: REDISLOCK_FENCING_TOKEN, as `run --fencing`
    /// sets it, else REDISLOCK_EPOCH, as `elect` sets it)
    #[arg(long, global = true, value_name = "TOKEN")]
    pub token: Option<u64>,
    #[command(subcommand)]
    pub op: FencedOp,
}

/// What `fenced` does. KEY is used as given (no --prefix); its fence is kept in `KEY:fenced`.
#[derive(Debug, Subcommand)]
pub enum FencedOp {
    /// Set KEY to VALUE; prints OK
    Set {
        /// The key written
        key: String,
        /// Its new value
        value: String,
    },
    /// Add N (default 1) to the integer at KEY (0 when it has none); prints the new value
    Incr {
        /// The key written
        key: String,
        /// How much to add (may be negative)
        #[arg(default_value_t = 1, allow_negative_numbers = true)]
        by: i64,
    },
    /// Print KEY's fence: the largest token a write to it was applied with (exit 1, "none",
    /// before the first)
    Fence {
        /// The key
        key: String,
    },
}

/// What a command gets when its lock is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnLost {
    /// SIGTERM, then SIGKILL after --kill-after
    Term,
    /// SIGKILL
    Kill,
    /// Nothing: it runs on (redislock still exits 76)
    Ignore,
}

#[derive(Debug, Args)]
pub struct AcquireArgs {
    #[command(flatten)]
    pub wait: Wait,
    /// The lease; nothing renews it: extend it with `redislock extend`
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub lease: Duration,
    /// The lock's name
    pub name: String,
}

#[derive(Debug, Args)]
pub struct ExtendArgs {
    /// The lock's name
    pub name: String,
    /// The new lease, from now
    #[arg(value_parser = parse_duration)]
    pub lease: Duration,
}

#[derive(Debug, Args)]
pub struct ReleaseArgs {
    /// The lock's name
    pub name: String,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Which kind's waiters to count
    #[arg(long, default_value = "any", value_parser = lock_kind())]
    pub kind: LockKind,
    /// Print one JSON object instead of lines
    #[arg(long)]
    pub json: bool,
    /// The lock's name
    pub name: String,
}

/// The kinds `status` looks at, by their names (`LockKind::name`).
fn lock_kind() -> impl clap::builder::TypedValueParser<Value = LockKind> {
    let names = LockKind::ALL.map(LockKind::name);
    PossibleValuesParser::new(names).map(|name| LockKind::from_name(&name).expect("a listed name"))
}

/// A duration: a number with a unit (`500ms`, `30s`, `2m`, `1h`, `1d`); a bare number is
/// seconds. Fractions are allowed (`1.5s`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let scale = match unit.trim() {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        other => {
            return Err(format!(
                "unknown unit '{other}' (use ms, s, m, h or d, as in 500ms, 30s, 2m, 1h, 1d)"
            ));
        }
    };
    let n: f64 = number
        .parse()
        .map_err(|_| format!("'{s}' is not a duration (write 500ms, 30s, 2m, 1h, 1d)"))?;
    Duration::try_from_secs_f64(n * scale).map_err(|_| format!("'{s}' is out of range"))
}

/// `TAKE/TOTAL`, both at least 1, TAKE at most TOTAL.
fn parse_permits(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("'{s}' is not TAKE/TOTAL (as in 1/3: one permit of three)");
    let (take, total) = s.split_once('/').ok_or_else(bad)?;
    let take: u32 = take.trim().parse().map_err(|_| bad())?;
    let total: u32 = total.trim().parse().map_err(|_| bad())?;
    if take == 0 || take > total {
        return Err(format!("'{s}': TAKE must be between 1 and TOTAL"));
    }
    Ok((take, total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert!(parse_duration("3 weeks").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn permits() {
        assert_eq!(parse_permits("1/3"), Ok((1, 3)));
        assert!(parse_permits("4/3").is_err());
        assert!(parse_permits("0/3").is_err());
        assert!(parse_permits("3").is_err());
    }

    #[test]
    fn definitions_are_consistent() {
        Cli::command().debug_assert();
    }
}

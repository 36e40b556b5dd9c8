//! One process per GPU on one machine, without a launcher: [`spawn_local`]
//! re-executes the current program once per rank with the environment
//! `torchrun` would give it, so the same code runs spawned locally or under
//! `torchrun --no-python`, and each rank joins through
//! [`Communicator::from_env`](super::Communicator::from_env).
//!
//! No transport of its own: the ranks meet through NCCL's rendezvous
//! (`NCCL_COMM_ID=127.0.0.1:<port>`, the same in every rank). The parent
//! only starts the ranks, waits for them up to a timeout, and kills the
//! others as soon as one fails — an error that names the rank, never a hang.
//!
//! `torchrun` and `from_env` agree as follows: `torchrun` sets `RANK`,
//! `WORLD_SIZE`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE`, `MASTER_ADDR` and
//! `MASTER_PORT`, and hosts its own store on `MASTER_PORT`, so
//! `NCCL_COMM_ID` must name another port and is never derived: `from_env`
//! refuses to run without it, naming the value to export
//! (`$MASTER_ADDR:$((MASTER_PORT + 1))`). A library cannot safely set an
//! environment variable for NCCL to read (`std::env::set_var` races every
//! thread that reads the environment), and a port next to torchrun's is a
//! guess; the spawner knows a free port, so it sets `NCCL_COMM_ID` itself.

use std::ffi::OsString;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// How long [`spawn_local`] waits for its ranks by default
/// ([`SpawnOptions::default`]): ten minutes.
pub const DEFAULT_SPAWN_TIMEOUT: Duration = Duration::from_secs(600);

/// Options of [`spawn_local`].
///
/// ```
/// use gpu_sync::nccl::SpawnOptions;
/// use std::time::Duration;
/// let o = SpawnOptions { timeout: Duration::from_secs(30), ..SpawnOptions::default() };
/// assert!(o.args.is_none() && o.env.is_empty());
/// ```
#[derive(Clone, Debug)]
pub struct SpawnOptions {
    /// How long to wait for every rank to exit; then the ranks still
    /// running are killed and [`SpawnError::TimedOut`] names them.
    pub timeout: Duration,
    /// The ranks' arguments; `None`: this process's own (without the
    /// program name).
    pub args: Option<Vec<OsString>>,
    /// Variables set in every rank besides the rank's own (the rest of the
    /// environment is inherited: `NCCL_NVLS_ENABLE`, `CUDA_VISIBLE_DEVICES`
    /// …).
    pub env: Vec<(OsString, OsString)>,
}

impl Default for SpawnOptions {
    fn default() -> Self {
        SpawnOptions { timeout: DEFAULT_SPAWN_TIMEOUT, args: None, env: Vec::new() }
    }
}

/// Where this process stands after [`spawn_local`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpawnRole {
    /// The parent: every rank ran and exited with status 0.
    Parent,
    /// One rank (spawned, or started by `torchrun`): go on to
    /// [`Communicator::from_env`](super::Communicator::from_env).
    Rank(RankEnv),
}

/// A rank's place, as a launcher's environment gives it: `RANK`,
/// `WORLD_SIZE`, `LOCAL_RANK` and `LOCAL_WORLD_SIZE` (torchrun's names).
///
/// ```
/// // In a process no launcher started, there is no rank.
/// assert_eq!(gpu_sync::nccl::RankEnv::from_env()?, None);
/// # Ok::<(), gpu_sync::nccl::SpawnError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RankEnv {
    /// This process's rank, `0..world_size` (`RANK`).
    pub rank: usize,
    /// The number of ranks (`WORLD_SIZE`).
    pub world_size: usize,
    /// The rank on this machine, the device ordinal it runs on
    /// (`LOCAL_RANK`).
    pub local_rank: usize,
    /// The number of ranks on this machine (`LOCAL_WORLD_SIZE`; the world
    /// size where it is unset).
    pub local_world_size: usize,
}

impl RankEnv {
    /// This process's rank from the environment: `None` when `RANK` is
    /// unset (no launcher started it).
    ///
    /// # Errors
    /// [`SpawnError::Env`] naming a variable missing beside `RANK`, not a
    /// number, or a rank out of range.
    pub fn from_env() -> Result<Option<RankEnv>, SpawnError> {
        if std::env::var_os("RANK").is_none() {
            return Ok(None);
        }
        let var = |name: &'static str| -> Result<Option<usize>, SpawnError> {
            let Some(v) = std::env::var_os(name) else { return Ok(None) };
            let s = v.to_string_lossy();
            s.trim()
                .parse()
                .map(Some)
                .map_err(|_| SpawnError::Env { var: name, problem: format!("{s:?} is not a number") })
        };
        let need = |name: &'static str| {
            var(name)?.ok_or(SpawnError::Env { var: name, problem: "is not set (RANK is)".into() })
        };
        let (rank, world_size, local_rank) = (need("RANK")?, need("WORLD_SIZE")?, need("LOCAL_RANK")?);
        let local_world_size = var("LOCAL_WORLD_SIZE")?.unwrap_or(world_size);
        if rank >= world_size || local_rank >= local_world_size {
            return Err(SpawnError::Env {
                var: "RANK",
                problem: format!(
                    "rank {rank} (local {local_rank}) is out of range for WORLD_SIZE={world_size} \
                     (LOCAL_WORLD_SIZE={local_world_size})"
                ),
            });
        }
        Ok(Some(RankEnv { rank, world_size, local_rank, local_world_size }))
    }
}

/// Why [`spawn_local`] failed.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// Zero ranks asked for.
    #[error("spawn_local: no rank to spawn (ranks = 0)")]
    NoRanks,
    /// A rank exited with a nonzero status or was killed by a signal; the
    /// other ranks were killed.
    #[error("rank {rank} of {world_size} failed: {status}; the other ranks were killed")]
    RankFailed {
        /// The rank that failed first.
        rank: usize,
        /// The number of ranks.
        world_size: usize,
        /// Its exit status (a code, or the signal that ended it).
        status: ExitStatus,
    },
    /// Some ranks were still running at the timeout: they were killed.
    #[error("ranks {ranks:?} of {world_size} still running after {timeout:?}: killed")]
    TimedOut {
        /// The ranks that had not exited, in order.
        ranks: Vec<usize>,
        /// The number of ranks.
        world_size: usize,
        /// The timeout that passed.
        timeout: Duration,
    },
    /// A launcher variable is malformed.
    #[error("{var} {problem}")]
    Env {
        /// The variable.
        var: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// The operating system refused: finding this executable, a free port,
    /// starting or waiting for a rank.
    #[error("spawn_local: {what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

impl SpawnError {
    /// The rank a failure or a timeout names (the first still running, for
    /// a timeout); `None` for the other errors.
    pub fn rank(&self) -> Option<usize> {
        match self {
            SpawnError::RankFailed { rank, .. } => Some(*rank),
            SpawnError::TimedOut { ranks, .. } => ranks.first().copied(),
            _ => None,
        }
    }
}

/// Runs this program as `ranks` processes, one per GPU of this machine.
///
/// In a process that already has a rank (`RANK` set: one this function
/// spawned, or one `torchrun` started), it spawns nothing and returns
/// [`SpawnRole::Rank`] with the launcher's values — `ranks` is then
/// ignored, the launcher's `WORLD_SIZE` counts. Otherwise it re-executes
/// [`std::env::current_exe`] `ranks` times, with this process's arguments
/// (or [`SpawnOptions::args`]) and environment, plus per rank `RANK`,
/// `LOCAL_RANK` (= rank), `WORLD_SIZE`, `LOCAL_WORLD_SIZE` (= `ranks`),
/// `MASTER_ADDR=127.0.0.1`, `MASTER_PORT` and
/// `NCCL_COMM_ID=127.0.0.1:<port>` (two distinct free ports, found by
/// binding port 0), and waits for every rank up to
/// [`SpawnOptions::timeout`]. As soon as one rank fails, or at the
/// timeout, the ranks still running are killed (`SIGKILL`) and reaped.
/// The ranks' output goes to this process's.
///
/// ```no_run
/// use gpu_sync::nccl::{self, CommOptions, Communicator, SpawnOptions, SpawnRole};
/// match nccl::spawn_local(2, &SpawnOptions::default())? {
///     SpawnRole::Parent => println!("both ranks exited with status 0"),
///     SpawnRole::Rank(r) => {
///         let comm = Communicator::from_env(CommOptions::default())?;
///         assert_eq!((comm.rank(), comm.size()), (r.rank, r.world_size));
///     }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`SpawnError::RankFailed`] naming the first rank seen to fail, with its
/// status; [`SpawnError::TimedOut`] naming the ranks killed at the
/// timeout; [`SpawnError::NoRanks`]; [`SpawnError::Env`] for a malformed
/// launcher variable; [`SpawnError::Io`] when a rank cannot be started.
pub fn spawn_local(ranks: usize, options: &SpawnOptions) -> Result<SpawnRole, SpawnError> {
    if let Some(r) = RankEnv::from_env()? {
        return Ok(SpawnRole::Rank(r));
    }
    if ranks == 0 {
        return Err(SpawnError::NoRanks);
    }
    let io = |what: &str| {
        let what = what.to_owned();
        move |source| SpawnError::Io { what, source }
    };
    let exe = std::env::current_exe().map_err(io("finding this executable"))?;
    let args: Vec<OsString> = options.args.clone().unwrap_or_else(|| std::env::args_os().skip(1).collect());
    // Both listeners live until both ports are read: two distinct ports.
    let store = std::net::TcpListener::bind("127.0.0.1:0").map_err(io("binding a free port"))?;
    let rendezvous = std::net::TcpListener::bind("127.0.0.1:0").map_err(io("binding a free port"))?;
    let port =
        |l: &std::net::TcpListener| l.local_addr().map(|a| a.port()).map_err(io("reading a bound port"));
    let (master_port, comm_port) = (port(&store)?, port(&rendezvous)?);
    drop((store, rendezvous));
    let mut children = Children(Vec::with_capacity(ranks));
    for rank in 0..ranks {
        let mut cmd = Command::new(&exe);
        cmd.args(&args)
            .envs(options.env.iter().map(|(k, v)| (k, v)))
            .env("RANK", rank.to_string())
            .env("LOCAL_RANK", rank.to_string())
            .env("WORLD_SIZE", ranks.to_string())
            .env("LOCAL_WORLD_SIZE", ranks.to_string())
            .env("MASTER_ADDR", "127.0.0.1")
            .env("MASTER_PORT", master_port.to_string())
            .env("NCCL_COMM_ID", format!("127.0.0.1:{comm_port}"));
        // On an error, `children` kills the ranks already started.
        let child = cmd.spawn().map_err(io(&format!("starting rank {rank} ({})", exe.display())))?;
        children.0.push(Some(child));
    }
    children.wait_all(options.timeout)?;
    Ok(SpawnRole::Parent)
}

/// The spawned ranks, by rank; `None` once reaped. Dropping it kills and
/// reaps the ones still running.
struct Children(Vec<Option<Child>>);

impl Children {
    /// Polls every rank until all exited with status 0, one failed, or the
    /// timeout passed.
    fn wait_all(&mut self, timeout: Duration) -> Result<(), SpawnError> {
        let world_size = self.0.len();
        let start = Instant::now();
        loop {
            for rank in 0..world_size {
                let Some(child) = self.0[rank].as_mut() else { continue };
                let status = child
                    .try_wait()
                    .map_err(|source| SpawnError::Io { what: format!("waiting for rank {rank}"), source })?;
                if let Some(status) = status {
                    self.0[rank] = None;
                    if !status.success() {
                        self.kill_all();
                        return Err(SpawnError::RankFailed { rank, world_size, status });
                    }
                }
            }
            let running: Vec<usize> = (0..world_size).filter(|&r| self.0[r].is_some()).collect();
            if running.is_empty() {
                return Ok(());
            }
            if start.elapsed() >= timeout {
                self.kill_all();
                return Err(SpawnError::TimedOut { ranks: running, world_size, timeout });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Kills (`SIGKILL`) and reaps every rank still running; errors are
    /// logged (a rank that exited meanwhile cannot be killed).
    fn kill_all(&mut self) {
        for (rank, slot) in self.0.iter_mut().enumerate() {
            if let Some(mut child) = slot.take() {
                if let Err(e) = child.kill() {
                    log::warn!("spawn_local: killing rank {rank}: {e}");
                }
                if let Err(e) = child.wait() {
                    log::warn!("spawn_local: reaping rank {rank}: {e}");
                }
            }
        }
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        self.kill_all();
    }
}

//! `nccl::spawn_local` and `Communicator::from_env`'s variables, on real
//! processes: this binary spawns itself. Its own `main` (no libtest: a
//! re-executed libtest binary would run every test again in every rank):
//! with `SPAWN_TEST` set it is a rank and does what the scenario says;
//! without, it runs each scenario as the parent and fails on the first
//! wrong outcome.
//!
//! cuda-sim cannot share a simulated NCCL between processes, so what is
//! proved here is everything up to NCCL's rendezvous: the environment each
//! rank gets, failures and hangs reported by rank (never a hang of the
//! parent), `from_env`'s errors, and a one-rank communicator joined from
//! the spawned environment (on the simulator in CI, on a GPU where there
//! is one).

use gpu_sync::nccl::{self, CommOptions, Communicator, RankEnv, SpawnError, SpawnOptions, SpawnRole};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

type TestResult = Result<(), String>;

/// A named scenario run by the parent.
type Test = (&'static str, fn() -> TestResult);

/// A rank's scenario, the launcher variables it gets, what its error says.
type EnvCase<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a [&'a str]);

/// The variables a launcher sets, removed where a test starts a process
/// with only some of them.
const LAUNCH_VARS: [&str; 7] =
    ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "NCCL_COMM_ID"];

fn main() {
    if let Ok(scenario) = std::env::var("SPAWN_TEST") {
        std::process::exit(match rank_main(&scenario) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("rank: {e}");
                1
            }
        });
    }
    if std::env::args().any(|a| a == "--list") {
        return; // no libtest tests to list
    }
    let tests: [Test; 7] = [
        ("every_rank_gets_its_own_rank_and_the_same_rendezvous", every_rank_gets_its_own_rank),
        ("a_failing_rank_is_named_and_the_others_killed", a_failing_rank_is_named),
        ("a_rank_killed_by_a_signal_is_named_with_the_signal", a_rank_killed_by_a_signal_is_named),
        ("a_hanging_rank_is_killed_at_the_timeout", a_hanging_rank_is_killed_at_the_timeout),
        ("no_ranks_is_an_error", no_ranks_is_an_error),
        ("from_env_errors_name_the_variable", from_env_errors_name_the_variable),
        ("one_spawned_rank_joins_a_communicator_from_env", one_rank_joins_from_env),
    ];
    let mut failed = 0;
    for (name, t) in tests {
        match t() {
            Ok(()) => println!("test {name} ... ok"),
            Err(e) => {
                println!("test {name} ... FAILED: {e}");
                failed += 1;
            }
        }
    }
    for name in ["report", "fail", "abort", "hang", "comm"] {
        let _ = std::fs::remove_dir_all(scratch_path(name));
    }
    if failed > 0 {
        println!("{failed} of {} failed", tests.len());
        std::process::exit(1);
    }
}

/// A rank's part of `scenario`.
fn rank_main(scenario: &str) -> TestResult {
    if scenario.starts_with("from_env") {
        return from_env_rank(scenario);
    }
    let env = RankEnv::from_env().map_err(|e| e.to_string())?;
    let Some(env) = env else { return Err("a spawned rank without RANK".into()) };
    // In a rank, spawn_local spawns nothing and gives the launcher's values.
    let role = nccl::spawn_local(99, &SpawnOptions::default()).map_err(|e| e.to_string())?;
    if role != SpawnRole::Rank(env) {
        return Err(format!("spawn_local in a rank returned {role:?}, not {env:?}"));
    }
    let dir = PathBuf::from(std::env::var_os("SPAWN_TEST_DIR").ok_or("SPAWN_TEST_DIR unset")?);
    let write = |what: &str, text: String| {
        std::fs::write(dir.join(format!("{what}-{}", env.rank)), text).map_err(|e| e.to_string())
    };
    match scenario {
        "report" => {
            let var = |k: &str| std::env::var(k).unwrap_or_else(|_| "<unset>".into());
            let lines: Vec<String> =
                LAUNCH_VARS.iter().chain(&["SPAWN_TEST_EXTRA"]).map(|k| var(k)).collect();
            write("env", lines.join("\n"))
        }
        "fail_rank_1" if env.rank == 1 => std::process::exit(3),
        "abort_rank_0" if env.rank == 0 => std::process::abort(),
        "hang_rank_1" if env.rank == 0 => Ok(()),
        "fail_rank_1" | "abort_rank_0" | "hang_rank_1" => {
            write("pid", std::process::id().to_string())?;
            std::thread::sleep(Duration::from_secs(60));
            Err("slept a minute: nobody killed this rank".into())
        }
        "comm" => {
            // The simulator without a GPU (CI); a GPU and its NCCL where there is one.
            gpu_sync::select_driver().map_err(|e| e.to_string())?;
            let c = Communicator::from_env(CommOptions {
                timeout: Duration::from_secs(20),
                ..Default::default()
            })
            .map_err(|e| e.to_string())?;
            if (c.rank(), c.size(), c.device().ordinal()) != (env.rank, env.world_size, env.local_rank as i32)
            {
                return Err(format!("{c:?} for {env:?}"));
            }
            write("comm", format!("{c:?}"))
        }
        _ => Err(format!("unknown scenario {scenario}")),
    }
}

/// A rank started with only some launcher variables: prints the error
/// `from_env` (or `RankEnv::from_env`) returned.
fn from_env_rank(scenario: &str) -> TestResult {
    let e = if scenario == "from_env_rank_env" {
        RankEnv::from_env().err().map(|e| e.to_string())
    } else {
        Communicator::from_env(CommOptions::default()).err().map(|e| e.to_string())
    };
    println!("{}", e.as_deref().unwrap_or("no error"));
    Ok(())
}

fn scratch_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("gpu-sync-spawn-{}-{name}", std::process::id()))
}

/// A fresh, empty folder for one scenario's files.
fn scratch(name: &str) -> Result<PathBuf, String> {
    let dir = scratch_path(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    Ok(dir)
}

fn options(scenario: &str, dir: &Path, timeout: Duration) -> SpawnOptions {
    SpawnOptions {
        timeout,
        args: Some(Vec::new()),
        env: vec![
            ("SPAWN_TEST".into(), scenario.into()),
            ("SPAWN_TEST_DIR".into(), dir.as_os_str().to_owned()),
            ("SPAWN_TEST_EXTRA".into(), OsString::from("passed")),
        ],
    }
}

fn every_rank_gets_its_own_rank() -> TestResult {
    let dir = scratch("report")?;
    let n = 3;
    let role =
        nccl::spawn_local(n, &options("report", &dir, Duration::from_secs(60))).map_err(|e| e.to_string())?;
    if role != SpawnRole::Parent {
        return Err(format!("the parent got {role:?}"));
    }
    let mut seen = BTreeSet::new();
    let mut shared: Option<Vec<String>> = None;
    for r in 0..n {
        let text =
            std::fs::read_to_string(dir.join(format!("env-{r}"))).map_err(|e| format!("rank {r}: {e}"))?;
        let v: Vec<String> = text.lines().map(str::to_owned).collect();
        let [rank, world, local, local_world, addr, master_port, comm_id, extra] = &v[..] else {
            return Err(format!("rank {r} wrote {v:?}"));
        };
        seen.insert(rank.clone());
        if (rank, local) != (&r.to_string(), &r.to_string()) {
            return Err(format!("file of rank {r} says RANK={rank} LOCAL_RANK={local}"));
        }
        if (world.as_str(), local_world.as_str(), addr.as_str(), extra.as_str())
            != ("3", "3", "127.0.0.1", "passed")
        {
            return Err(format!(
                "rank {r}: WORLD_SIZE={world} LOCAL_WORLD_SIZE={local_world} MASTER_ADDR={addr} extra={extra}"
            ));
        }
        let comm_port = comm_id.strip_prefix("127.0.0.1:").ok_or(format!("NCCL_COMM_ID={comm_id}"))?;
        if comm_port == master_port || comm_port.parse::<u16>().is_err() {
            return Err(format!("NCCL_COMM_ID={comm_id} with MASTER_PORT={master_port}"));
        }
        let same = vec![world.clone(), master_port.clone(), comm_id.clone()];
        if shared.get_or_insert_with(|| same.clone()) != &same {
            return Err(format!("rank {r} got {same:?}, rank 0 {shared:?}"));
        }
    }
    if seen.len() != n {
        return Err(format!("ranks seen: {seen:?}"));
    }
    Ok(())
}

/// The ranks that wrote a pid (the sleepers) are gone: killed and reaped.
fn sleepers_gone(dir: &Path) -> TestResult {
    for entry in std::fs::read_dir(dir).map_err(|e| e.to_string())? {
        let path = entry.map_err(|e| e.to_string())?.path();
        let pid = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
        if Path::new(&format!("/proc/{}", pid.trim())).exists() {
            return Err(format!("{} (pid {pid}) still exists", path.display()));
        }
    }
    Ok(())
}

fn a_failing_rank_is_named() -> TestResult {
    let dir = scratch("fail")?;
    let start = Instant::now();
    match nccl::spawn_local(3, &options("fail_rank_1", &dir, Duration::from_secs(50))) {
        Err(SpawnError::RankFailed { rank: 1, world_size: 3, status }) if status.code() == Some(3) => {}
        other => return Err(format!("expected rank 1 failing with 3, got {other:?}")),
    }
    if start.elapsed() > Duration::from_secs(20) {
        return Err(format!("the failure took {:?} to report", start.elapsed()));
    }
    sleepers_gone(&dir)
}

fn a_rank_killed_by_a_signal_is_named() -> TestResult {
    let dir = scratch("abort")?;
    match nccl::spawn_local(2, &options("abort_rank_0", &dir, Duration::from_secs(50))) {
        Err(e @ SpawnError::RankFailed { rank: 0, status, .. }) if status.signal() == Some(6) => {
            if !e.to_string().contains("rank 0 of 2") || e.rank() != Some(0) {
                return Err(format!("the message does not name rank 0: {e}"));
            }
        }
        other => return Err(format!("expected rank 0 killed by SIGABRT, got {other:?}")),
    }
    sleepers_gone(&dir)
}

fn a_hanging_rank_is_killed_at_the_timeout() -> TestResult {
    let dir = scratch("hang")?;
    let start = Instant::now();
    let timeout = Duration::from_secs(2);
    match nccl::spawn_local(2, &options("hang_rank_1", &dir, timeout)) {
        Err(SpawnError::TimedOut { ranks, world_size: 2, timeout: t }) if ranks == [1] && t == timeout => {}
        other => return Err(format!("expected rank 1 timed out, got {other:?}")),
    }
    let took = start.elapsed();
    if took < timeout || took > timeout + Duration::from_secs(15) {
        return Err(format!("the timeout of {timeout:?} was reported after {took:?}"));
    }
    sleepers_gone(&dir)
}

fn no_ranks_is_an_error() -> TestResult {
    match nccl::spawn_local(0, &SpawnOptions::default()) {
        Err(SpawnError::NoRanks) => Ok(()),
        other => Err(format!("expected NoRanks, got {other:?}")),
    }
}

/// Runs this binary as a rank of scenario `scenario` with exactly `vars`
/// of the launcher variables; its output (the error it got).
fn from_env_output(scenario: &str, vars: &[(&str, &str)]) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(exe);
    for k in LAUNCH_VARS {
        cmd.env_remove(k);
    }
    let out =
        cmd.env("SPAWN_TEST", scenario).envs(vars.iter().copied()).output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("the rank failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn from_env_errors_name_the_variable() -> TestResult {
    let all = [("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "0")];
    let torchrun = [("MASTER_ADDR", "10.1.2.3"), ("MASTER_PORT", "29500")];
    let cases: [EnvCase; 6] = [
        ("from_env", vec![], &["RANK is not set"]),
        ("from_env", vec![all[0], all[2]], &["WORLD_SIZE is not set"]),
        ("from_env", vec![all[0], all[1]], &["LOCAL_RANK is not set"]),
        ("from_env", vec![("RANK", "x"), all[1], all[2]], &["RANK=\"x\" is not a number"]),
        // Under torchrun: not derived, but the value to export is named.
        (
            "from_env",
            [&all[..], &torchrun[..]].concat(),
            &["NCCL_COMM_ID is not set", "NCCL_COMM_ID=10.1.2.3:29501"],
        ),
        ("from_env_rank_env", vec![all[0], all[2]], &["WORLD_SIZE is not set"]),
    ];
    for (scenario, vars, want) in cases {
        let got = from_env_output(scenario, &vars)?;
        if let Some(w) = want.iter().find(|w| !got.contains(*w)) {
            return Err(format!("{scenario} with {vars:?}: expected {w:?} in {got:?}"));
        }
    }
    Ok(())
}

fn one_rank_joins_from_env() -> TestResult {
    let dir = scratch("comm")?;
    nccl::spawn_local(1, &options("comm", &dir, Duration::from_secs(60))).map_err(|e| e.to_string())?;
    let got = std::fs::read_to_string(dir.join("comm-0")).map_err(|e| e.to_string())?;
    if got != "Communicator(rank 0 of 1, device 0)" {
        return Err(format!("rank 0 made {got:?}"));
    }
    Ok(())
}

//! Acceptance tests of `detrun hunt`, `detrun replay` and `detrun analyze`:
//! racy guests whose bug shows only under an unlucky interleaving are found
//! by trying seeds, replayed exactly, and explained; the JSON report and the
//! JUnit file are well formed; a flaky `cargo test` is caught by name.

use detrun_tests::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// A whole hunt of a few hundred runs must fail its test, not hang the suite.
const HUNT_LIMIT: Duration = Duration::from_secs(600);

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    scratch_dir("hunt", name)
}

/// `detrun ARGS...` from the workspace root with a longer limit than
/// [`detrun`] (hunts run many guests).
fn detrun_long(args: &[&str]) -> Output {
    detrun_limit(args, HUNT_LIMIT)
}

fn read_report(p: &Path) -> Value {
    let text = std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("report {} was not written: {e}", p.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("report {} is not JSON ({e}):\n{text}", p.display()))
}

fn results(r: &Value) -> &[Value] {
    r["results"]
        .as_array()
        .unwrap_or_else(|| panic!("report has no `results` array:\n{r:#}"))
}

fn seed_of(x: &Value) -> u64 {
    x["seed"]
        .as_u64()
        .unwrap_or_else(|| panic!("result without an integer seed: {x}"))
}

fn with_status<'a>(r: &'a Value, status: &str) -> Vec<&'a Value> {
    results(r)
        .iter()
        .filter(|x| x["status"] == status)
        .collect()
}

/// Run `detrun hunt HUNT_ARGS... --report DIR/report.json -- CMD...` and
/// return its output and the parsed report.
fn hunt(dir: &Path, hunt_args: &[&str], cmd: &[&str]) -> (Output, Value) {
    let report = dir.join("report.json");
    let mut args = vec!["hunt"];
    args.extend_from_slice(hunt_args);
    args.extend_from_slice(&["--no-progress", "--report", path_str(&report), "--"]);
    args.extend_from_slice(cmd);
    let o = detrun_long(&args);
    let r = read_report(&report);
    (o, r)
}

/// Shape checks shared by every hunt: one result per run, the failure
/// count matches the results, and the groups account for every failure.
fn check_counts(r: &Value, runs: u64, what: &str) {
    assert_eq!(
        r["runs"].as_u64(),
        Some(runs),
        "{what}: `runs` in the report"
    );
    assert_eq!(
        results(r).len() as u64,
        runs,
        "{what}: one result per run expected"
    );
    let failing = (with_status(r, "fail").len() + with_status(r, "timeout").len()) as u64;
    assert_eq!(
        r["failures"].as_u64(),
        Some(failing),
        "{what}: `failures` must count the failing (and timed-out) results"
    );
    let groups = r["groups"].as_array().expect("`groups` array");
    let grouped: u64 = groups
        .iter()
        .map(|g| g["count"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(
        grouped, failing,
        "{what}: the groups must account for every failure:\n{groups:#?}"
    );
    for g in groups {
        assert_eq!(
            g["seeds"].as_array().map(|s| s.len() as u64),
            g["count"].as_u64(),
            "{what}: a group's count is its number of seeds: {g}"
        );
    }
}

/// The whole story for one racy guest: the default history passes, a hunt
/// of 200 chaos seeds finds a failing one, and that seed replays the
/// failure every time.
fn race(guest: &str) {
    let bin = build_c(guest, false);
    let bin = path_str(&bin);

    let d = detrun(&["--", bin]);
    assert_eq!(
        code(&d),
        0,
        "{guest}: the default schedule must pass:\n{}",
        show(&d)
    );

    let dir = scratch(guest);
    let (o, r) = hunt(&dir, &["--runs", "200"], &[bin]);
    assert_eq!(
        code(&o),
        1,
        "{guest}: hunt must exit 1 (a failure found):\n{}",
        show(&o)
    );
    check_counts(&r, 200, guest);
    assert_eq!(r["policy"], "mix", "{guest}: the default hunt policy");
    let failing = with_status(&r, "fail");
    assert!(
        !failing.is_empty(),
        "{guest}: no failing seed in the report:\n{r:#}"
    );
    let first = failing[0];
    let seed = seed_of(first);
    assert!(
        first["stderr_tail"]
            .as_str()
            .is_some_and(|t| t.contains(&format!("{guest}:"))),
        "{guest}: the failing run's stderr_tail must hold the guest's message: {first}"
    );
    assert!(
        first["replay"]
            .as_str()
            .is_some_and(|t| t.contains(&format!("--seed {seed}"))),
        "{guest}: the failing run's replay command must name its seed: {first}"
    );
    // The portfolio names the seed's strategy, and its replay line gives it.
    let strategy = first["strategy"].as_str().unwrap_or("");
    let policy = if strategy.starts_with("pct") {
        "pct"
    } else {
        "chaos"
    };
    assert!(
        first["replay"]
            .as_str()
            .is_some_and(|t| t.contains(&format!("--policy {policy}"))),
        "{guest}: the replay command must give the seed's strategy {strategy}: {first}"
    );
    let out = stdout(&o);
    assert!(
        out.lines().any(|l| l.contains("replay: detrun replay --seed ")
            && l.contains("--policy ")
            && l.contains(bin)),
        "{guest}: the final table must give a `replay: detrun replay --seed S --policy P -- CMD` line:\n{out}"
    );

    let expected = first["exit_code"].as_i64();
    let line: Vec<&str> = first["replay"]
        .as_str()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .collect();
    assert_replays_fail(guest, seed, &line, expected, 10);
    // `replay --seed S` with no policy is the portfolio's strategy too.
    let s = seed.to_string();
    let args = ["replay", "--seed", &s, "--", bin];
    assert_replays_fail(guest, seed, &args, expected, 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn hunt_race_atomicity() {
    race("race_atomicity");
}

#[test]
fn hunt_race_order() {
    race("race_order");
}

#[test]
fn hunt_race_lost_wakeup() {
    race("race_lost_wakeup");
}

#[test]
fn hunt_race_uaf() {
    race("race_uaf");
}

#[test]
fn hunt_race_files() {
    race("race_files");
}

/// The lines of `text` from the first one starting with `start` up to (not
/// including) the first later one starting with any of `ends`.
fn block<'a>(lines: &[&'a str], start: &str, ends: &[&str]) -> Vec<&'a str> {
    let Some(i) = lines.iter().position(|l| l.trim_start().starts_with(start)) else {
        return Vec::new();
    };
    let mut out = vec![lines[i]];
    for l in &lines[i + 1..] {
        if ends.iter().any(|e| l.trim_start().starts_with(e)) {
            break;
        }
        out.push(l);
    }
    out
}

/// Run a `detrun --schedule FILE -- CMD` line printed by analyze with this
/// build's binary.
fn run_printed(line: &str, dir: &Path) -> Output {
    let words: Vec<&str> = line.split_whitespace().collect();
    assert!(
        words.first().is_some_and(|w| w.ends_with("detrun")),
        "a printed command must start with detrun: {line}"
    );
    let at = words
        .iter()
        .position(|w| *w == "--schedule")
        .unwrap_or_else(|| panic!("no --schedule in: {line}"));
    let file = Path::new(words.get(at + 1).expect("--schedule FILE"));
    assert!(
        file.exists(),
        "schedule file {} does not exist: {line}",
        file.display()
    );
    assert!(
        file.starts_with(dir) || dir.join(file).exists(),
        "schedule file {} is not in --out-dir {}",
        file.display(),
        dir.display()
    );
    let mut cmd = Command::new(detrun_bin());
    cmd.args(&words[1..]).current_dir(root());
    run_bounded(cmd, RUN_LIMIT)
}

#[test]
fn analyze_race_atomicity() {
    let bin = build_c("race_atomicity", false);
    let bin = path_str(&bin);
    // A failing chaos seed, found with the plain `--chaos` runner.
    let seed = (1..=200u64)
        .find(|s| code(&detrun(&["--chaos", "--seed", &s.to_string(), "--", bin])) == 1)
        .expect("some chaos seed in 1..=200 must overdraw");
    let dir = scratch("analyze");
    let s = seed.to_string();
    let o = detrun_long(&[
        "analyze",
        "--seed",
        &s,
        "--policy",
        "chaos",
        "--out-dir",
        path_str(&dir),
        "--",
        bin,
    ]);
    let text = format!("{}\n{}", stdout(&o), stderr(&o));
    let lines: Vec<&str> = text.lines().collect();
    let ctx = || format!("analyze --seed {seed}:\n{}", show(&o));

    let crit = lines
        .iter()
        .find_map(|l| l.split_once("critical decision ").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("no `critical decision K of N` line; {}", ctx()));
    let nums: Vec<u64> = crit
        .split_whitespace()
        .filter_map(|w| w.trim_matches(|c: char| !c.is_ascii_digit()).parse().ok())
        .collect();
    assert!(
        crit.contains(" of ") && nums.len() >= 2 && nums[0] <= nums[1] && nums[1] > 0,
        "malformed `critical decision K of N` line: {crit}; {}",
        ctx()
    );

    let ends = ["event A:", "event B:", "replay failing:", "replay passing:"];
    let a = block(&lines, "event A:", &ends);
    let b = block(&lines, "event B:", &ends);
    assert!(!a.is_empty(), "no `event A:` block; {}", ctx());
    assert!(!b.is_empty(), "no `event B:` block; {}", ctx());
    for (name, blk) in [("A", &a), ("B", &b)] {
        let joined = blk.join("\n");
        assert!(
            joined.contains("nanosleep"),
            "event {name} must be a syscall in the window (clock_nanosleep from usleep):\n{joined}\n{}",
            ctx()
        );
        assert!(
            blk.iter().filter(|l| !l.trim().is_empty()).count() >= 2,
            "event {name} must give thread, syscall, time and a backtrace:\n{joined}"
        );
    }

    // Both events stand in the same place of the guest: the usleep inside
    // the check-then-act window (one thread calls it, the other resumes
    // from it), shown as the same `teller+OFFSET` frame in both blocks.
    let frames = |blk: &[&str]| -> std::collections::BTreeSet<String> {
        blk.iter()
            .filter_map(|l| {
                l.split_whitespace()
                    .find(|w| w.starts_with("teller+"))
                    .map(str::to_string)
            })
            .collect()
    };
    let (fa, fb) = (frames(&a), frames(&b));
    assert!(
        fa.intersection(&fb).next().is_some(),
        "events A and B do not share a window frame: A {fa:?}, B {fb:?}; {}",
        ctx()
    );

    let failing = lines
        .iter()
        .find_map(|l| l.trim_start().strip_prefix("replay failing:"))
        .unwrap_or_else(|| panic!("no `replay failing:` line; {}", ctx()));
    let passing = lines
        .iter()
        .find_map(|l| l.trim_start().strip_prefix("replay passing:"))
        .unwrap_or_else(|| panic!("no `replay passing:` line; {}", ctx()));
    let f = run_printed(failing, &dir);
    assert_ne!(
        code(&f),
        0,
        "the failing schedule passed:\n{failing}\n{}",
        show(&f)
    );
    assert!(
        stderr(&f).contains("race_atomicity: overdrawn"),
        "the failing schedule failed for another reason:\n{}",
        show(&f)
    );
    let p = run_printed(passing, &dir);
    assert_eq!(
        code(&p),
        0,
        "the passing schedule failed:\n{passing}\n{}",
        show(&p)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn hunt_jobs_throughput() {
    let bin = build_c("race_atomicity", false);
    let bin = path_str(&bin);
    let mut rates = Vec::new();
    let mut verdicts: Vec<BTreeMap<u64, String>> = Vec::new();
    for jobs in ["1", "2"] {
        let dir = scratch(&format!("jobs{jobs}"));
        let (o, r) = hunt(&dir, &["--runs", "40", "--jobs", jobs], &[bin]);
        assert_eq!(
            code(&o),
            1,
            "--jobs {jobs}: 40 runs of race_atomicity must find a failure:\n{}",
            show(&o)
        );
        check_counts(&r, 40, &format!("--jobs {jobs}"));
        assert_eq!(r["jobs"].to_string(), jobs, "`jobs` in the report");
        let rate = r["runs_per_sec"]
            .as_f64()
            .unwrap_or_else(|| panic!("no numeric runs_per_sec: {r:#}"));
        assert!(rate > 0.0, "runs_per_sec must be positive: {rate}");
        rates.push(rate);
        verdicts.push(
            results(&r)
                .iter()
                .map(|x| (seed_of(x), x["status"].as_str().unwrap_or("?").to_string()))
                .collect(),
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
    eprintln!(
        "race_atomicity, 40 runs: --jobs 1: {:.1} runs/s, --jobs 2: {:.1} runs/s ({:.2}x)",
        rates[0],
        rates[1],
        rates[1] / rates[0]
    );
    // Parallelism must not change any run's history.
    assert_eq!(
        verdicts[0], verdicts[1],
        "the same seeds must give the same verdicts with --jobs 1 and --jobs 2"
    );
}

/// `import jsonschema, junitparser`, installing them with pip if needed.
fn python_deps() {
    let have = || {
        Command::new("python3")
            .args(["-c", "import jsonschema, junitparser"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if have() {
        return;
    }
    let o = Command::new("python3")
        .args(["-m", "pip", "install", "-q", "jsonschema", "junitparser"])
        .output()
        .expect("python3 must be installed");
    assert!(
        o.status.success(),
        "`python3 -m pip install -q jsonschema junitparser` failed:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        have(),
        "jsonschema/junitparser still cannot be imported after pip install"
    );
}

const VALIDATE_PY: &str = r#"
import json, sys
import xml.etree.ElementTree as ET
import jsonschema
from junitparser import JUnitXml, TestSuite, Failure

schema_path, report_path, junit_path = sys.argv[1:4]
schema = json.load(open(schema_path))
report = json.load(open(report_path))
jsonschema.Draft202012Validator.check_schema(schema)
errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(report),
                key=lambda e: list(e.absolute_path))
for e in errors:
    print("schema: %s: %s" % ("/".join(map(str, e.absolute_path)) or "<root>", e.message))
if errors:
    sys.exit(1)

problems = []
root = ET.parse(junit_path).getroot()
if root.tag != "testsuites":
    problems.append("JUnit root element is <%s>, not <testsuites>" % root.tag)
xml = JUnitXml.fromfile(junit_path)
suites = [xml] if isinstance(xml, TestSuite) else list(xml)
if len(suites) != 1:
    problems.append("expected one <testsuite>, got %d" % len(suites))
suite = suites[0]
if suite.name != "detrun hunt":
    problems.append("testsuite name %r" % suite.name)
if suite.tests != report["runs"]:
    problems.append("testsuite tests=%s, report runs=%s" % (suite.tests, report["runs"]))
if suite.failures != report["failures"]:
    problems.append("testsuite failures=%s, report failures=%s" % (suite.failures, report["failures"]))
cases = list(suite)
if len(cases) != report["runs"]:
    problems.append("%d testcases for %d runs" % (len(cases), report["runs"]))
failed = set()
for c in cases:
    if c.classname != "detrun.hunt":
        problems.append("testcase %s: classname %r" % (c.name, c.classname))
    if any(isinstance(r, Failure) for r in c.result):
        failed.add(c.name)
if len(failed) != report["failures"]:
    problems.append("%d testcases with <failure>, report failures=%s" % (len(failed), report["failures"]))
names = {c.name for c in cases}
want = {"seed-%d" % r["seed"] for r in report["results"]}
if names != want:
    problems.append("testcase names %s != seeds %s" % (sorted(names)[:5], sorted(want)[:5]))
want_failed = {"seed-%d" % r["seed"] for r in report["results"] if r["status"] in ("fail", "timeout")}
if failed != want_failed:
    problems.append("failing testcases %s != failing seeds %s" % (sorted(failed), sorted(want_failed)))
for p in problems:
    print("junit:", p)
if problems:
    sys.exit(1)
print("ok: report valid, %d runs, %d failures" % (report["runs"], report["failures"]))
"#;

#[test]
fn report_schema_and_junit() {
    python_deps();
    let bin = build_c("race_atomicity", false);
    let bin = path_str(&bin);
    let dir = scratch("schema");
    let junit = dir.join("hunt.xml");
    let (o, _r) = hunt(&dir, &["--runs", "30", "--junit", path_str(&junit)], &[bin]);
    assert_eq!(
        code(&o),
        1,
        "30 runs of race_atomicity must find a failure:\n{}",
        show(&o)
    );
    let script = dir.join("validate.py");
    std::fs::write(&script, VALIDATE_PY).expect("write validate.py");
    let schema = root().join("docs").join("hunt-report.schema.json");
    let v = Command::new("python3")
        .arg(&script)
        .arg(&schema)
        .arg(dir.join("report.json"))
        .arg(&junit)
        .output()
        .expect("run python3");
    let vout = String::from_utf8_lossy(&v.stdout);
    assert!(
        v.status.success(),
        "report/JUnit validation failed:\n{vout}{}\n--- report\n{}\n--- junit\n{}",
        String::from_utf8_lossy(&v.stderr),
        std::fs::read_to_string(dir.join("report.json")).unwrap_or_default(),
        std::fs::read_to_string(&junit).unwrap_or_default()
    );
    eprintln!("{}", vout.trim());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn hunt_flaky_cargo_test() {
    let manifest = "testdata/flaky_crate/Cargo.toml";
    // Build the crate's tests once, outside detrun, so that the hunted runs
    // only run them.
    let b = Command::new("cargo")
        .args(["test", "--offline", "--no-run", "--manifest-path", manifest])
        .current_dir(root())
        .output()
        .expect("run cargo");
    assert!(
        b.status.success(),
        "building flaky_crate's tests failed:\n{}",
        String::from_utf8_lossy(&b.stderr)
    );
    let dir = scratch("flaky");
    let (o, r) = hunt(
        &dir,
        &["--runs", "30", "--timeout", "120"],
        &[
            "cargo",
            "test",
            "--offline",
            "--manifest-path",
            manifest,
            "-q",
        ],
    );
    assert_eq!(code(&o), 1, "hunt must catch the flaky test:\n{}", show(&o));
    check_counts(&r, 30, "flaky_crate");
    for bad in ["error", "timeout"] {
        let v = with_status(&r, bad);
        assert!(
            v.is_empty(),
            "cargo test runs must neither time out nor error under detrun: {v:#?}"
        );
    }
    let named: Vec<&str> = results(&r)
        .iter()
        .filter_map(|x| x["failed_tests"].as_array())
        .flatten()
        .filter_map(|t| t.as_str())
        .collect();
    assert!(
        named.iter().any(|t| t.contains("flaky_counter_race")),
        "flaky_counter_race must appear in some result's failed_tests (got {named:?}):\n{r:#}"
    );
    assert!(
        !named
            .iter()
            .any(|t| t.contains("triangle_numbers") || t.contains("atomic_counter")),
        "only the flaky test may be reported as failed: {named:?}"
    );
    for x in with_status(&r, "fail") {
        assert!(
            x["failed_tests"].as_array().is_some_and(|v| v
                .iter()
                .any(|t| t.as_str().is_some_and(|t| t.contains("flaky_counter_race")))),
            "a failing cargo test run must name its failed test: {x}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A hung or crashing run is reported and never hangs the hunt: wall-clock
/// and virtual timeouts, and a death by signal.
#[test]
fn hung_and_crashed_runs_are_reported() {
    let dir = std::env::temp_dir().join(format!("detrun-hunt-hang-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report = dir.join("r.json");
    let cases: [(&[&str], &str); 3] = [
        (
            &["--timeout", "2", "--", "sh", "-c", "while :; do :; done"],
            "timeout after 2s",
        ),
        (
            &["--virtual-timeout", "30", "--", "sh", "-c", "sleep 1000"],
            "virtual timeout after 30s",
        ),
        (&["--", "sh", "-c", "kill -SEGV $$"], "signal 11"),
    ];
    for (args, sig) in cases {
        let mut a = vec![
            "hunt",
            "--runs",
            "2",
            "--no-progress",
            "--report",
            report.to_str().unwrap(),
        ];
        a.extend_from_slice(args);
        let o = detrun(&a);
        assert_eq!(code(&o), 1, "{args:?}: {}", stderr(&o));
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        assert_eq!(r["failures"], 2, "{r}");
        let s = r["results"][0]["signature"].as_str().unwrap_or("");
        assert!(
            s.starts_with(sig),
            "{args:?}: signature {s:?}, want {sig:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

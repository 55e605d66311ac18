//! The installation for C and PHP users: `scripts/install/install.sh` into temporary prefixes, then what
//! a user would do with the result.
//!
//! - C, shared: `examples/c/oversell.c` built with nothing but `pkg-config --cflags --libs
//!   redislock`; the program needs `libredislock.so.0.<minor>` (the SONAME), runs with
//!   `LD_LIBRARY_PATH=<prefix>/lib` only, and does not start without it.
//! - C, static (`--library-type static`): the same with `pkg-config --static`; the program needs no
//!   libredislock at run time.
//! - PHP: the installed package, with `REDISLOCK_LIB` unset, loads the installed library by its
//!   versioned name through the dynamic loader (`LD_LIBRARY_PATH` stands in for ldconfig), and
//!   `FFI::load()` of the installed PHP header does too.
//! - DESTDIR: files land under DESTDIR, the paths inside them do not name it.
//!
//! Each test runs the script itself (the `dist` build is shared through cargo's target directory:
//! the first one builds it, the others wait on cargo's lock). Needs cc, pkg-config, readelf and
//! php with FFI; `scripts/setup.sh` installs them. The demo runs against a `redis-server` started
//! here on a free loopback port.

mod support;

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use support::{RedisServer, unique_name, wait_child};

/// A cold `dist` build of the library and its dependencies, on a busy 2-core machine.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(20 * 60);
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `libredislock.so.0.<minor>` for 0.x versions, `libredislock.so.<major>` after (build.rs).
fn expected_soname() -> String {
    let (major, minor) = (
        env!("CARGO_PKG_VERSION_MAJOR"),
        env!("CARGO_PKG_VERSION_MINOR"),
    );
    if major == "0" {
        format!("libredislock.so.0.{minor}")
    } else {
        format!("libredislock.so.{major}")
    }
}

/// A directory under the system's temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(what: &str) -> TempDir {
        let dir = std::env::temp_dir().join(unique_name(&format!("redislock-{what}")));
        fs::create_dir_all(&dir).expect("cannot create a temp dir");
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn require_tools(tools: &[&str]) {
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|tool| {
            !Command::new("sh")
                .arg("-c")
                .arg(format!("command -v {tool}"))
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .collect();
    assert!(
        missing.is_empty(),
        "the installation tests need {}: run scripts/setup.sh",
        missing.join(", ")
    );
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn report(out: &Output) -> String {
    format!(
        "status {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    )
}

/// Runs `cmd` to the end (bounded) and returns its output, whatever its status.
fn run(cmd: &mut Command, timeout: Duration) -> Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    wait_child(child, timeout)
}

fn run_ok(cmd: &mut Command, timeout: Duration) -> Output {
    let out = run(cmd, timeout);
    assert!(out.status.success(), "{cmd:?} failed\n{}", report(&out));
    out
}

/// `bash scripts/install/install.sh ARGS` from the repository root, without the caller's DESTDIR.
fn install(args: &[&OsStr]) -> Output {
    run_ok(
        Command::new("bash")
            .arg(repo_root().join("scripts/install/install.sh"))
            .args(args)
            .env_remove("DESTDIR")
            .current_dir(repo_root()),
        INSTALL_TIMEOUT,
    )
}

/// `pkg-config ARGS redislock` with only `pc_dir` on the search path.
fn pkg_config(pc_dir: &Path, args: &[&str]) -> Vec<String> {
    let out = run_ok(
        Command::new("pkg-config")
            .args(args)
            .arg("redislock")
            .env("PKG_CONFIG_PATH", pc_dir)
            .env_remove("PKG_CONFIG_LIBDIR")
            .env_remove("PKG_CONFIG_SYSROOT_DIR"),
        RUN_TIMEOUT,
    );
    text(&out.stdout)
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// Compiles `examples/c/oversell.c` with exactly `flags` (pkg-config's output) and warnings.
fn build_oversell(flags: &[String], out: &Path) {
    run_ok(
        Command::new("cc")
            .args(["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror"])
            .arg(repo_root().join("examples/c/oversell.c"))
            .args(flags)
            .arg("-o")
            .arg(out),
        RUN_TIMEOUT,
    );
}

/// The NEEDED, RPATH and RUNPATH entries of an ELF file.
fn dynamic_entries(file: &Path, kind: &str) -> Vec<String> {
    let out = run_ok(Command::new("readelf").arg("-d").arg(file), RUN_TIMEOUT);
    text(&out.stdout)
        .lines()
        .filter(|l| l.contains(&format!("({kind})")))
        .filter_map(|l| Some(l.split_once('[')?.1.trim_end_matches(']').to_owned()))
        .collect()
}

/// Section names of an ELF file or of every member of an archive.
fn sections(file: &Path) -> String {
    text(
        &run_ok(
            Command::new("readelf").args(["-S", "-W"]).arg(file),
            RUN_TIMEOUT,
        )
        .stdout,
    )
}

/// Runs the oversell demo against `server` with exactly the environment given (plus PATH).
fn run_oversell(program: &Path, server: &RedisServer, env: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(program);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("REDIS_URL", server.url());
    for (k, v) in env {
        cmd.env(k, v);
    }
    run(&mut cmd, RUN_TIMEOUT)
}

fn assert_sold_exactly_the_stock(out: &Output) {
    let stdout = text(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("With redislock: exactly 100 sold"),
        "the demo did not sell exactly the stock under redislock\n{}",
        report(out)
    );
}

fn symlink_target(path: &Path) -> String {
    fs::read_link(path)
        .unwrap_or_else(|e| panic!("{} is not a symlink: {e}", path.display()))
        .to_string_lossy()
        .into_owned()
}

#[test]
fn shared_library_installs_with_its_soname_and_links_with_pkg_config_only() {
    require_tools(&["cc", "pkg-config", "readelf"]);
    let tmp = TempDir::new("install-shared");
    let prefix = tmp.path().join("prefix");
    install(&[
        "--prefix".as_ref(),
        prefix.as_os_str(),
        "--split-debug".as_ref(),
    ]);
    let lib = prefix.join("lib");
    let soname = expected_soname();
    let real = format!("libredislock.so.{}", env!("CARGO_PKG_VERSION"));

    // The command-line tool, its man pages and completions.
    let version = run_ok(
        Command::new(prefix.join("bin/redislock")).arg("--version"),
        RUN_TIMEOUT,
    );
    assert_eq!(
        text(&version.stdout).trim(),
        format!("redislock {}", env!("CARGO_PKG_VERSION"))
    );
    for page in ["redislock.1", "redislock-run.1", "redislock-status.1"] {
        let page = prefix.join("share/man/man1").join(page);
        let roff = std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{page:?}: {e}"));
        assert!(roff.contains(".TH"), "{page:?} is not a man page");
    }
    for completion in [
        "bash-completion/completions/redislock",
        "zsh/site-functions/_redislock",
        "fish/vendor_completions.d/redislock.fish",
    ] {
        assert!(
            prefix.join("share").join(completion).is_file(),
            "{completion}"
        );
    }

    // The versioned file, its SONAME, the two symlinks, -z nodelete kept.
    assert_eq!(symlink_target(&lib.join(&soname)), real);
    assert_eq!(symlink_target(&lib.join("libredislock.so")), soname);
    let so = lib.join(&real);
    assert_eq!(dynamic_entries(&so, "SONAME"), vec![soname.clone()]);
    let flags = text(&run_ok(Command::new("readelf").arg("-d").arg(&so), RUN_TIMEOUT).stdout);
    assert!(
        flags.contains("NODELETE"),
        "{real} lost -z nodelete:\n{flags}"
    );

    // Stripped: no debug sections in what programs link; the split-off debug info is there and
    // linked.
    let so_sections = sections(&so);
    assert!(!so_sections.contains(".debug_"), "{real} is not stripped");
    assert!(
        so_sections.contains(".gnu_debuglink"),
        "{real} has no debug link"
    );
    let debug = lib.join(".debug").join(format!("{real}.debug"));
    assert!(
        sections(&debug).contains(".debug_info"),
        "{} holds no debug info",
        debug.display()
    );
    let archive = lib.join("libredislock.a");
    assert!(
        !sections(&archive).contains(".debug_info"),
        "libredislock.a is not stripped of debug info"
    );

    // Headers: the C header as in the tree; the PHP header naming the SONAME.
    let include = prefix.join("include");
    assert_eq!(
        fs::read(include.join("redislock.h")).unwrap(),
        fs::read(repo_root().join("include/redislock.h")).unwrap()
    );
    let php_header = fs::read_to_string(include.join("redislock_php.h")).unwrap();
    assert!(
        php_header.starts_with(&format!(
            "#define FFI_SCOPE \"REDISLOCK\"\n#define FFI_LIB \"{soname}\"\n"
        )),
        "installed redislock_php.h does not name {soname}:\n{}",
        &php_header[..php_header.len().min(200)]
    );

    // pkg-config: the flags, the version, the variables.
    let pc_dir = lib.join("pkgconfig");
    let cflags_libs = pkg_config(&pc_dir, &["--cflags", "--libs"]);
    assert_eq!(
        cflags_libs,
        vec![
            format!("-I{}", include.display()),
            format!("-L{}", lib.display()),
            "-lredislock".to_owned()
        ]
    );
    assert_eq!(
        pkg_config(&pc_dir, &["--modversion"]),
        vec![env!("CARGO_PKG_VERSION")]
    );
    assert_eq!(
        pkg_config(&pc_dir, &["--variable=soname"]),
        vec![soname.clone()]
    );
    let statics = pkg_config(&pc_dir, &["--static", "--libs"]);
    assert!(
        statics.len() > 3 && statics.contains(&"-lpthread".to_owned()),
        "Libs.private is missing the static library's system libraries: {statics:?}"
    );

    // The demo, built with pkg-config's flags only.
    let program = tmp.path().join("oversell");
    build_oversell(&cflags_libs, &program);
    assert!(
        dynamic_entries(&program, "NEEDED").contains(&soname),
        "the program does not need {soname}: {:?}",
        dynamic_entries(&program, "NEEDED")
    );
    assert!(dynamic_entries(&program, "RPATH").is_empty());
    assert!(dynamic_entries(&program, "RUNPATH").is_empty());

    let server = RedisServer::start();
    let out = run_oversell(&program, &server, &[("LD_LIBRARY_PATH", &lib)]);
    assert_sold_exactly_the_stock(&out);

    // Nothing else on this machine provides the library: without the prefix it does not start.
    let out = run_oversell(&program, &server, &[]);
    assert!(
        !out.status.success() && text(&out.stderr).contains(&soname),
        "the program ran without LD_LIBRARY_PATH (another {soname} on the loader's path?)\n{}",
        report(&out)
    );
}

#[test]
fn static_library_links_with_pkg_config_static() {
    require_tools(&["cc", "pkg-config", "readelf"]);
    let tmp = TempDir::new("install-static");
    let prefix = tmp.path().join("prefix");
    install(&[
        "--prefix".as_ref(),
        prefix.as_os_str(),
        "--library-type".as_ref(),
        "static".as_ref(),
        "--no-cli".as_ref(),
    ]);
    assert!(!prefix.join("bin").exists(), "--no-cli installed the tool");
    let lib = prefix.join("lib");
    let names: Vec<String> = fs::read_dir(&lib)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.contains(&"libredislock.a".to_owned()) && !names.iter().any(|n| n.contains(".so")),
        "a static installation has exactly the archive: {names:?}"
    );
    assert!(!prefix.join("share/redislock/php").exists());

    let flags = pkg_config(&lib.join("pkgconfig"), &["--static", "--cflags", "--libs"]);
    let program = tmp.path().join("oversell-static");
    build_oversell(&flags, &program);
    let needed = dynamic_entries(&program, "NEEDED");
    assert!(
        !needed.iter().any(|n| n.contains("redislock")),
        "the statically linked program still needs libredislock: {needed:?}"
    );

    let server = RedisServer::start();
    let out = run_oversell(&program, &server, &[]);
    assert_sold_exactly_the_stock(&out);
}

#[test]
fn php_package_loads_the_installed_library_by_its_versioned_name() {
    require_tools(&["php"]);
    let tmp = TempDir::new("install-php");
    let prefix = tmp.path().join("prefix");
    install(&["--prefix".as_ref(), prefix.as_os_str()]);
    let lib = prefix.join("lib");
    let soname = expected_soname();
    // Only the SONAME is left for the loader to find: PHP must ask for the versioned name.
    fs::remove_file(lib.join("libredislock.so")).unwrap();

    let package = prefix.join("share/redislock/php");
    let server = RedisServer::start();
    let script = r#"
        require getenv('PACKAGE') . '/autoload.php';
        $out = [
            'default' => Redislock\Library::DEFAULT_LIB,
            'version' => Redislock\Library::version(),
            'header' => Redislock\Library::headerPath(),
        ];
        foreach (file('/proc/self/maps') as $line) {
            if (str_contains($line, 'libredislock')) {
                $out['mapped'] = trim(substr($line, strpos($line, '/')));
                break;
            }
        }
        $client = Redislock\Client::fromUrl(getenv('URL'));
        $lock = $client->tryAcquire('install-test:' . getmypid(), 5000, false, true);
        $out['held'] = $lock->isHeld();
        $out['fencing'] = $lock->fencingToken();
        $lock->release();
        // The installed PHP header alone, as ffi.preload or FFI::load() would use it.
        $out['load'] = FFI::load(getenv('HEADER'))->redislock_version();
        echo json_encode($out), "\n";
    "#;
    let out = run_ok(
        Command::new("php")
            .args(["-d", "ffi.enable=1", "-r", script])
            .env_remove("REDISLOCK_LIB")
            .env_remove("REDISLOCK_HEADER")
            .env("LD_LIBRARY_PATH", &lib)
            .env("PACKAGE", &package)
            .env("HEADER", prefix.join("include/redislock_php.h"))
            .env("URL", server.url()),
        RUN_TIMEOUT,
    );
    let stdout = text(&out.stdout);
    let field = |name: &str| -> String {
        let key = format!("\"{name}\":");
        let rest = &stdout[stdout
            .find(&key)
            .unwrap_or_else(|| panic!("no {name} in {stdout}"))
            + key.len()..];
        let end = rest.find([',', '}']).unwrap();
        rest[..end].trim_matches('"').replace("\\/", "/")
    };
    assert_eq!(field("default"), soname, "Library::DEFAULT_LIB");
    assert_eq!(field("version"), env!("CARGO_PKG_VERSION"));
    assert_eq!(field("load"), env!("CARGO_PKG_VERSION"));
    assert_eq!(
        PathBuf::from(field("header")),
        package.join("redislock_php.h")
    );
    assert_eq!(
        PathBuf::from(field("mapped")),
        lib.join(format!("libredislock.so.{}", env!("CARGO_PKG_VERSION"))),
        "PHP loaded another libredislock: {stdout}"
    );
    assert_eq!(field("held"), "true");
    assert_eq!(field("fencing"), "1");
}

#[test]
fn destdir_stages_the_files_without_naming_destdir_in_them() {
    require_tools(&["pkg-config", "readelf"]);
    let tmp = TempDir::new("install-destdir");
    let stage = tmp.path().join("stage");
    let out = install(&[
        "--destdir".as_ref(),
        stage.as_os_str(),
        "--prefix".as_ref(),
        "/opt/redislock-test".as_ref(),
        "--libdir".as_ref(),
        "/opt/redislock-test/lib64".as_ref(),
    ]);
    assert!(!Path::new("/opt/redislock-test").exists());
    let root = stage.join("opt/redislock-test");
    let lib = root.join("lib64");
    let soname = expected_soname();
    assert!(lib.join(&soname).is_file(), "{}", text(&out.stdout));
    assert!(root.join("include/redislock.h").is_file());
    assert!(root.join("share/redislock/php/autoload.php").is_file());
    assert!(root.join("share/redislock/php/src/Library.php").is_file());
    assert!(!root.join("share/redislock/php/tests").exists());

    let pc = fs::read_to_string(lib.join("pkgconfig/redislock.pc")).unwrap();
    assert!(pc.contains("\nprefix=/opt/redislock-test\n"), "{pc}");
    assert!(pc.contains("\nlibdir=${prefix}/lib64\n"), "{pc}");
    assert!(!pc.contains(stage.to_str().unwrap()), "{pc}");
    // A packager's pkg-config sees the staged tree through its sysroot.
    let out = run_ok(
        Command::new("pkg-config")
            .args(["--cflags", "--libs", "redislock"])
            .env("PKG_CONFIG_PATH", lib.join("pkgconfig"))
            .env("PKG_CONFIG_SYSROOT_DIR", &stage),
        RUN_TIMEOUT,
    );
    assert_eq!(
        text(&out.stdout).split_whitespace().collect::<Vec<_>>(),
        vec![
            format!("-I{}", root.join("include").display()),
            format!("-L{}", lib.display()),
            "-lredislock".to_owned()
        ]
    );
}

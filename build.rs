//! Build script: linker flags for the shared library, nothing else (the C headers are generated
//! by scripts/ci/gen-headers.sh and committed).
//!
//! - The shared library starts threads (lock renewal, connection pools). PHP `dlclose`s a library
//!   when its FFI object is freed; unmapping the code under a running thread would crash the
//!   process. `-z nodelete` makes the dynamic loader keep the library mapped for good.
//! - With `REDISLOCK_SONAME=1` in the environment (scripts/install/install.sh sets it, for the `dist`
//!   profile), the shared library gets its SONAME, `libredislock.so.0.<minor>` while the version
//!   is 0.x (for 0.x versions the minor version is the compatibility unit, as in Cargo's semver
//!   rules) and `libredislock.so.<major>` from 1.0 on. Plain builds get none, so programs linked
//!   with `-L target/<profile> -lredislock` keep running against the `libredislock.so` that cargo
//!   writes there (a SONAME would make them look for a `libredislock.so.0.<minor>` that only an
//!   installation creates).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=REDISLOCK_SONAME");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    // ELF platforms whose linkers know `-z nodelete` and `-soname`.
    let elf = [
        "linux",
        "android",
        "freebsd",
        "netbsd",
        "openbsd",
        "dragonfly",
        "solaris",
        "illumos",
    ];
    if !elf.contains(&os.as_str()) {
        return;
    }
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    match std::env::var("REDISLOCK_SONAME").as_deref() {
        Ok("1") => println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{}", soname()),
        Ok("0") | Ok("") | Err(_) => {}
        Ok(other) => panic!("REDISLOCK_SONAME must be 1 or 0 (unset), not {other:?}"),
    }
}

/// `libredislock.so.0.<minor>` for 0.x versions, `libredislock.so.<major>` from 1.0 on.
fn soname() -> String {
    let major =
        std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets CARGO_PKG_VERSION_MAJOR");
    let minor =
        std::env::var("CARGO_PKG_VERSION_MINOR").expect("cargo sets CARGO_PKG_VERSION_MINOR");
    if major == "0" {
        format!("libredislock.so.0.{minor}")
    } else {
        format!("libredislock.so.{major}")
    }
}

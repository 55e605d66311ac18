//! `redislock`: run a command under a distributed lock held in Redis, from shell scripts and
//! cron. See `docs/cli.md` and `redislock --help`.

mod args;
mod commands;
mod connect;
mod exit;
mod fenced;
mod run;
mod signals;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use crate::args::{Cli, Command};
use crate::exit::Failure;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return ExitCode::from(usage_error(e)),
    };
    let result = match cli.command {
        Command::Run(a) => run::run(&cli.conn, a),
        Command::Acquire(a) => commands::acquire(&cli.conn, a),
        Command::Extend(a) => commands::extend(&cli.conn, a),
        Command::Release(a) => commands::release(&cli.conn, a),
        Command::Status(a) => commands::status(&cli.conn, a),
        Command::Elect(a) => run::run(&cli.conn, a.into_run()),
        Command::Leader(a) => commands::leader(&cli.conn, a),
        Command::Fenced(a) => fenced::fenced(&cli.conn, a),
        Command::Man { command } => man(command.as_deref()),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "redislock", &mut io::stdout());
            Ok(0)
        }
    };
    match result {
        Ok(status) => ExitCode::from(status),
        Err(f) => {
            eprintln!("redislock: {}", exit::one_line(&f.message));
            ExitCode::from(f.status)
        }
    }
}

/// `--help` and `--version` on standard output (status 0); a usage error on one line of
/// standard error (status 64).
fn usage_error(e: clap::Error) -> u8 {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                exit::USAGE
            } else {
                0
            }
        }
        _ => {
            let text = e.render().to_string();
            // clap's message, before its usage lines, on one line.
            let message: Vec<&str> = text
                .lines()
                .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more"))
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            let message = message.join(" ");
            let message = message.trim_start_matches("error: ");
            eprintln!("redislock: {message} (see redislock --help)");
            exit::USAGE
        }
    }
}

/// The man page of redislock (or of one of its commands, `redislock-COMMAND`), from the same
/// definitions as `--help`.
fn man(command: Option<&str>) -> Result<u8, Failure> {
    let mut cli = Cli::command();
    // Global options are copied into each command by build().
    cli.build();
    let page = match command {
        None => cli,
        Some(name) => {
            let sub = cli
                .get_subcommands()
                .find(|c| c.get_name() == name)
                .cloned()
                .ok_or_else(|| {
                    Failure::new(
                        exit::USAGE,
                        format!("no command '{name}' (see redislock --help)"),
                    )
                })?;
            let full = format!("redislock-{name}");
            sub.name(full.clone())
                .bin_name(format!("redislock {name}"))
                .display_name(full)
        }
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut out)
        .map_err(|e| Failure::new(exit::SOFTWARE, format!("man page: {e}")))?;
    let mut stdout = io::stdout().lock();
    let _ = stdout.write_all(&out).and_then(|()| stdout.flush());
    Ok(0)
}

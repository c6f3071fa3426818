//! Black-box tests of the `toolsmith` binary: one test binary, one module per subcommand.

#[macro_use]
mod context;

mod config;
mod doctor;
mod list;
mod manifest;
mod run;

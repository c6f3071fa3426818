//! Black-box tests of the `toolsmith` binary: one test binary, one module per subcommand.

#[macro_use]
mod context;

mod audit;
mod config;
mod doctor;
mod export;
mod generate;
mod list;
mod manifest;
mod policy;
mod run;
mod serve;
mod show;
mod validate;

//! Black-box tests of the `toolsmith` binary: one test binary, one module per subcommand.

#[macro_use]
mod context;

mod audit;
mod config;
mod deploy;
mod docs;
mod doctor;
mod egress;
mod export;
mod faults;
mod generate;
mod grants;
mod hostile;
mod inputs;
mod install;
mod leaks;
mod learn;
mod list;
mod load;
mod manifest;
mod migration;
mod mounts;
mod peers;
mod pinned;
mod policy;
mod prepare;
mod probes;
mod processes;
mod project;
mod read_masks;
mod register;
mod run;
mod sandbox;
mod scale;
mod secrets;
mod serve;
mod serve_http;
mod serve_trust;
mod show;
mod system_tools;
mod terminal;
mod transactions;
mod trust;
mod ux;
mod validate;

//! The rlimits of a run: the resources the executor limits per process, and
//! the executor's own hard limits, which bound every run's.
//!
//! The executor reads its hard limits once, with `getrlimit` (through nix);
//! the program's process sets a run's limits with a raw `setrlimit` before
//! `execve` (`spawn.rs`), so an [`Rlimit`] carries nix's [`Resource`], whose
//! number casts to the C library's own type (`__rlimit_resource_t` on glibc,
//! `int` on musl) at that call.

use std::io;

use nix::sys::resource::Resource;

use crate::Error;

/// The rlimits the executor may set on a run, with the name its errors give each.
const RESOURCES: [(Resource, &str); 6] = [
    (Resource::RLIMIT_CORE, "getrlimit(RLIMIT_CORE)"),
    (Resource::RLIMIT_CPU, "getrlimit(RLIMIT_CPU)"),
    (Resource::RLIMIT_FSIZE, "getrlimit(RLIMIT_FSIZE)"),
    (Resource::RLIMIT_NOFILE, "getrlimit(RLIMIT_NOFILE)"),
    (Resource::RLIMIT_DATA, "getrlimit(RLIMIT_DATA)"),
    (Resource::RLIMIT_NPROC, "getrlimit(RLIMIT_NPROC)"),
];

/// One resource limit to set in the program's process.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rlimit {
    pub(crate) resource: Resource,
    pub(crate) soft: u64,
    pub(crate) hard: u64,
}

/// The executor's own hard rlimits: a run's limits are clamped to them,
/// since raising a hard limit needs CAP_SYS_RESOURCE.
#[derive(Debug)]
pub(crate) struct HardLimits(Vec<(Resource, u64)>);

impl HardLimits {
    /// The executor's own hard limits, read with `get` (nix's `getrlimit`,
    /// or a test's stand-in). A failure is an error: a limit taken as 0
    /// would clamp that limit of every run to 0.
    pub(crate) fn read(
        get: impl Fn(Resource) -> nix::Result<(u64, u64)>,
    ) -> Result<HardLimits, Error> {
        RESOURCES
            .into_iter()
            .map(|(resource, call)| match get(resource) {
                Ok((_, hard)) => Ok((resource, hard)),
                Err(errno) => Err(Error::Sys {
                    call,
                    source: io::Error::from(errno),
                }),
            })
            .collect::<Result<Vec<_>, Error>>()
            .map(HardLimits)
    }

    /// The limit of `resource` for a run that wants `soft` and `hard`,
    /// clamped to the executor's own hard limit.
    pub(crate) fn clamp(&self, resource: Resource, soft: u64, hard: u64) -> Rlimit {
        let ceiling = self
            .0
            .iter()
            .find(|(known, _)| *known == resource)
            .map_or(libc::RLIM_INFINITY, |(_, hard)| *hard);
        let hard = hard.min(ceiling);
        Rlimit {
            resource,
            soft: soft.min(hard),
            hard,
        }
    }
}

#[cfg(test)]
mod tests {
    use nix::errno::Errno;
    use nix::sys::resource::Resource;

    use super::HardLimits;
    use crate::Error;

    #[test]
    fn a_failing_getrlimit_is_an_error_that_names_the_resource() {
        let failing = |resource| {
            if resource == Resource::RLIMIT_NOFILE {
                Err(Errno::EPERM)
            } else {
                Ok((1, 1))
            }
        };
        match HardLimits::read(failing) {
            Err(Error::Sys { call, source }) => {
                assert_eq!(call, "getrlimit(RLIMIT_NOFILE)");
                assert_eq!(source.raw_os_error(), Some(libc::EPERM));
            }
            other => panic!("expected a getrlimit error, got {other:?}"),
        }
    }

    #[test]
    fn a_run_limit_is_clamped_to_the_executors_hard_limit() {
        let hard = HardLimits::read(|resource| {
            Ok(if resource == Resource::RLIMIT_FSIZE {
                (10, 100)
            } else {
                (libc::RLIM_INFINITY, libc::RLIM_INFINITY)
            })
        })
        .unwrap();
        let clamped = hard.clamp(Resource::RLIMIT_FSIZE, 500, 1000);
        assert_eq!((clamped.soft, clamped.hard), (100, 100));
        let within = hard.clamp(Resource::RLIMIT_FSIZE, 50, 80);
        assert_eq!((within.soft, within.hard), (50, 80));
        let other = hard.clamp(Resource::RLIMIT_NOFILE, 64, 64);
        assert_eq!((other.soft, other.hard), (64, 64));
    }

    #[test]
    fn the_executors_own_limits_are_read() {
        assert!(HardLimits::read(nix::sys::resource::getrlimit).is_ok());
    }
}

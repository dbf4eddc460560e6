//! Landlock (Linux ≥ 5.13): a ruleset that lets a process read and run
//! only what it is given, write only its own directories, and (ABI ≥ 6)
//! signal or reach no process outside its sandbox. Built in the parent;
//! the child enforces it on itself just before it runs the program.
//!
//! Constants and layouts are those of `include/uapi/linux/landlock.h`.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

const CREATE_RULESET_VERSION: u32 = 1;
const RULE_PATH_BENEATH: u32 = 1;

const EXECUTE: u64 = 1 << 0;
const WRITE_FILE: u64 = 1 << 1;
const READ_FILE: u64 = 1 << 2;
const READ_DIR: u64 = 1 << 3;
/// Removing, creating (every kind of node) and linking: bits 4 to 12.
const CHANGE_TREE: u64 = 0b1_1111_1111 << 4;
const REFER: u64 = 1 << 13;
const TRUNCATE: u64 = 1 << 14;
const IOCTL_DEV: u64 = 1 << 15;
/// Making character and block devices: never granted, not even in a
/// sandbox's own directory (as root, a block device node made there would
/// read the whole disk).
const MAKE_DEVICE: u64 = (1 << 6) | (1 << 11);

const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
const SCOPE_SIGNAL: u64 = 1 << 1;

/// Rights that a rule on a single file (not a directory) may carry.
const FILE_RIGHTS: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// What a confined process may do beneath one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read files and list directories, run programs.
    ReadAndRun,
    /// Everything but making devices: read, run, write, create, remove.
    Full,
    /// Read and write (and truncate) existing files (`/dev/null`), nothing
    /// else.
    ReadAndWrite,
}

/// A ruleset ready to be enforced by a child (the descriptor is closed on
/// exec, so the program itself never holds it).
#[derive(Debug)]
pub struct Ruleset {
    fd: OwnedFd,
}

/// The Landlock ABI version the kernel offers; `None` when it has none
/// (too old, or Landlock not enabled at boot).
pub fn abi_version() -> Option<u32> {
    // SAFETY: with the version flag the kernel reads no attribute.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(version).ok().filter(|&v| v > 0)
}

/// Every file-system right the kernel of `abi` knows: all are denied
/// unless a rule grants them.
fn handled_fs(abi: u32) -> u64 {
    let mut rights = EXECUTE | WRITE_FILE | READ_FILE | READ_DIR | CHANGE_TREE;
    if abi >= 2 {
        rights |= REFER;
    }
    if abi >= 3 {
        rights |= TRUNCATE;
    }
    if abi >= 5 {
        rights |= IOCTL_DEV;
    }
    rights
}

impl Ruleset {
    /// A ruleset granting `rules` and nothing else on the file system.
    /// Paths that do not exist are skipped (a system without `/lib64`).
    pub fn new(rules: &[(&Path, Access)]) -> Result<Ruleset, String> {
        let abi = abi_version()
            .ok_or("this kernel offers no Landlock (Linux 5.13 or newer with Landlock enabled)")?;
        let handled = handled_fs(abi);
        // The attribute grows with the ABI; older kernels take the prefix.
        let attr = RulesetAttr {
            handled_access_fs: handled,
            handled_access_net: 0,
            scoped: if abi >= 6 {
                SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
            } else {
                0
            },
        };
        let size = match abi {
            1..=3 => 8,
            4 | 5 => 16,
            _ => std::mem::size_of::<RulesetAttr>(),
        };
        // SAFETY: `attr` outlives the call and `size` does not exceed it.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                &attr as *const RulesetAttr,
                size,
                0u32,
            )
        };
        if fd < 0 {
            return Err(format!(
                "creating a Landlock ruleset failed: {}",
                std::io::Error::last_os_error()
            ));
        }
        let ruleset = Ruleset {
            // SAFETY: the kernel just returned this descriptor to us alone.
            fd: unsafe { OwnedFd::from_raw_fd(fd as RawFd) },
        };
        for (path, access) in rules {
            ruleset.allow(path, *access, handled)?;
        }
        Ok(ruleset)
    }

    fn allow(&self, path: &Path, access: Access, handled: u64) -> Result<(), String> {
        let Ok(name) = CString::new(path.as_os_str().as_bytes()) else {
            return Err(format!("{} holds a NUL byte", path.display()));
        };
        // SAFETY: a NUL-terminated path; O_PATH opens without reading.
        let raw = unsafe { libc::open(name.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
        if raw < 0 {
            let error = std::io::Error::last_os_error();
            if error.kind() == std::io::ErrorKind::NotFound {
                return Ok(());
            }
            return Err(format!(
                "opening {} for a sandbox rule: {error}",
                path.display()
            ));
        }
        // SAFETY: `open` just returned it.
        let parent = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut allowed = match access {
            Access::ReadAndRun => EXECUTE | READ_FILE | READ_DIR,
            Access::Full => handled & !MAKE_DEVICE,
            Access::ReadAndWrite => READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV,
        } & handled;
        if !path.is_dir() {
            allowed &= FILE_RIGHTS;
        }
        let attr = PathBeneathAttr {
            allowed_access: allowed,
            parent_fd: parent.as_raw_fd(),
        };
        // SAFETY: `attr` and the descriptor outlive the call.
        let done = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                self.fd.as_raw_fd(),
                RULE_PATH_BENEATH,
                &attr as *const PathBeneathAttr,
                0u32,
            )
        };
        if done < 0 {
            return Err(format!(
                "adding the sandbox rule for {} failed: {}",
                path.display(),
                std::io::Error::last_os_error()
            ));
        }
        Ok(())
    }

    /// The descriptor a child passes to [`enforce`].
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Enforces the ruleset `fd` on the calling process and everything it
/// starts, for good. Runs in a forked child: async-signal-safe (no
/// allocation, no locks).
pub fn enforce(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: plain system calls on integers.
    unsafe {
        // Without it an unprivileged process may not restrict itself; it
        // also keeps setuid programs from gaining rights.
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

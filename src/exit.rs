//! Every exit code gpuctl returns, in one place (Terraform's convention, plus 64 for usage).

/// How a gpuctl run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// Success; for `plan --detailed-exitcode`, also "no changes".
    Success,
    /// Findings of error severity, or the command failed.
    Failure,
    /// `--detailed-exitcode` only: changes are present.
    Changes,
    /// The command line was wrong (EX_USAGE), so that 2 keeps one meaning.
    Usage,
}

impl ExitStatus {
    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            ExitStatus::Success => 0,
            ExitStatus::Failure => 1,
            ExitStatus::Changes => 2,
            ExitStatus::Usage => 64,
        }
    }
}

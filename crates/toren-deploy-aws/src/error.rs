//! The crate's one error type: what failed, said with the fix where there is one.

/// What can go wrong deploying.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An AWS call failed (credentials, permissions, a bad parameter, the service).
    #[error("{action} failed: {message}")]
    Aws {
        action: &'static str,
        message: String,
    },
    /// The stack ended in a failed state.
    #[error("the stack {stack} ended {status}{}", reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default())]
    StackFailed {
        stack: String,
        status: String,
        reason: Option<String>,
    },
    /// The stack did not settle in time.
    #[error("the stack {stack} was still {status} after {waited_secs} s")]
    Timeout {
        stack: String,
        status: String,
        waited_secs: u64,
    },
    /// A key the deployment needs was not given.
    #[error("{0} is not set; export it before deploying (it is stored in Secrets Manager)")]
    MissingKey(&'static str),
}

impl Error {
    /// What the operator can do about it.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            Error::Aws { .. } => Some(
                "check the AWS credentials and region (AWS_PROFILE, AWS_REGION) and the \
                 caller's permissions for CloudFormation, Secrets Manager, ECS, RDS, EC2, \
                 ELB, IAM and Logs",
            ),
            Error::StackFailed { .. } => Some(
                "the stack's events say which resource failed: aws cloudformation describe-stack-events",
            ),
            Error::Timeout { .. } => Some("run it again later: it picks up where the stack is"),
            Error::MissingKey(_) => None,
        }
    }
}

/// An AWS SDK error as text, with the service's code and message when it sent them.
pub(crate) fn aws<E>(action: &'static str, e: &aws_sdk_cloudformation::error::SdkError<E>) -> Error
where
    E: std::error::Error + aws_sdk_cloudformation::error::ProvideErrorMetadata + 'static,
{
    let message = match e.as_service_error() {
        Some(service) => format!(
            "{}: {}",
            service.code().unwrap_or("error"),
            service.message().unwrap_or("no message")
        ),
        None => aws_sdk_cloudformation::error::DisplayErrorContext(e).to_string(),
    };
    Error::Aws { action, message }
}

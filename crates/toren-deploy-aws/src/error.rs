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
    /// The SDK's credential chain found no AWS credentials.
    #[error("no AWS credentials: {reason}")]
    NoCredentials { reason: String },
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
            Error::NoCredentials { .. } => Some(
                "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE naming a \
                 profile in ~/.aws/config (`aws configure` writes one), and AWS_REGION",
            ),
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
        None => causes(e),
    };
    Error::Aws { action, message }
}

/// `error` and its causes, each as the first line of its `Display`, joined by `: ` on one
/// line. The SDK's own report of the chain (`DisplayErrorContext`) ends in the `Debug`
/// form of the whole error, headers and bodies included, and the credential chain's error
/// lists every source it tried on lines of their own: neither is for a person's terminal.
pub(crate) fn causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut said: Vec<String> = Vec::new();
    let mut next = Some(error);
    while let Some(cause) = next {
        let full = cause.to_string();
        let first = full.lines().next().unwrap_or_default();
        let text = first
            .trim_end_matches("Attempted:")
            .trim_end()
            .trim_end_matches('.')
            .to_owned();
        // Many errors repeat their source in their own message; each thing is said once.
        if !text.is_empty() && !said.iter().any(|earlier| earlier.contains(&text)) {
            said.push(text);
        }
        next = cause.source();
    }
    said.join(": ")
}

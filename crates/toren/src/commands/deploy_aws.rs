//! `toren deploy-aws`: Toren's AWS tier through `toren-deploy-aws`. The keys come from
//! this process's settings (ANTHROPIC_API_KEY, OPENAI_API_KEY, E2B_API_KEY,
//! TOREN_API_TOKEN), the AWS endpoint and region (AWS_ENDPOINT_URL, AWS_REGION) too; what was created, updated
//! or left alone is said on stderr, the API's URL printed on stdout.

use anyhow::anyhow;
use toren_deploy_aws::{Change, Deployer, Deployment, GivenVpc};

use crate::cli::DeployAwsArgs;
use crate::exit::Failure;
use crate::wiring;

pub(crate) async fn deploy_aws(args: &DeployAwsArgs) -> Result<u8, Failure> {
    let settings = wiring::settings()?;
    let deployer = Deployer::connect(&wiring::aws_target(&settings)).await;
    if args.delete {
        let deleted = deployer
            .delete(&args.stack, args.delete_secrets)
            .await
            .map_err(failure)?;
        if deleted.stack_deleted {
            eprintln!("deleted the stack {}", args.stack);
            eprintln!(
                "kept: the database's final snapshot (RDS takes it as the stack goes; \
                 aws rds describe-db-snapshots lists it)"
            );
        } else {
            eprintln!("no stack {} to delete", args.stack);
        }
        for name in &deleted.secrets_deleted {
            eprintln!("scheduled for deletion in 7 days: secret {name}");
        }
        for name in &deleted.secrets_kept {
            eprintln!("kept: secret {name} (--delete-secrets removes it)");
        }
        return Ok(0);
    }
    let required = |value: &Option<String>, flag: &str| {
        value
            .clone()
            .filter(|v| !v.is_empty())
            .ok_or_else(|| Failure::usage(anyhow!("{flag} is required to deploy")))
    };
    let vpc = match &args.vpc_id {
        None => None,
        Some(vpc_id) => {
            if args.public_subnets.len() < 2 || args.private_subnets.len() < 2 {
                return Err(Failure::usage(anyhow!(
                    "--vpc-id needs two or more --public-subnets (the load balancer) and \
                     two or more --private-subnets (the tasks and the database)"
                )));
            }
            Some(GivenVpc {
                vpc_id: vpc_id.clone(),
                public_subnets: args.public_subnets.clone(),
                private_subnets: args.private_subnets.clone(),
            })
        }
    };
    let deployment = Deployment {
        stack: args.stack.clone(),
        image: required(&args.image, "--image")?,
        certificate_arn: required(&args.certificate_arn, "--certificate-arn")?,
        vpc,
        workers: args.workers,
    };
    let outcome = deployer
        .deploy(&deployment, &wiring::deploy_keys(&settings), args.dry_run)
        .await
        .map_err(failure)?;
    for step in &outcome.steps {
        let said = match (step.change, outcome.dry_run) {
            (Change::Create, false) => "created",
            (Change::Update, false) => "updated",
            (Change::Create, true) => "would create",
            (Change::Update, true) => "would update",
            (Change::Unchanged, _) => "unchanged",
        };
        eprintln!("{said}: {}", step.what);
    }
    if outcome.dry_run {
        eprintln!("dry run: nothing was changed");
    } else if !outcome.changed() {
        eprintln!("nothing to do: the stack and its secrets are as asked");
    }
    eprintln!(
        "the API's bearer token is the secret {}",
        outcome.api_token_secret
    );
    if let Some(url) = &outcome.api_url {
        println!("{url}");
    }
    Ok(0)
}

fn failure(e: toren_deploy_aws::Error) -> Failure {
    let hint = e.hint();
    let error = match hint {
        Some(hint) => anyhow!("{e}; {hint}"),
        None => anyhow!("{e}"),
    };
    match e {
        // What this machine lacks, not what AWS said: a usage error, as a missing key is.
        toren_deploy_aws::Error::MissingKey(_) | toren_deploy_aws::Error::NoCredentials { .. } => {
            Failure::usage(error)
        }
        _ => Failure::failed(error),
    }
}

"""toren deploy-aws end to end against moto in server mode (run by scripts/test-aws).

Starts moto_server on a free loopback port, points the real `toren` binary at it
(AWS_ENDPOINT_URL), and checks through boto3 what it did: --dry-run changes nothing; the
first run creates the secrets and the stack (CREATE_COMPLETE) and prints the API URL; the
secrets hold the values given; no secret value appears in the stack's parameters, outputs
or template; a second run is a no-op (no new secret version, the stack not updated); a
changed key updates only its secret; --delete removes the stack and keeps the secrets;
--delete --delete-secrets schedules them for deletion.
"""

import json
import os
import socket
import subprocess
import sys
import time

import boto3

toren, bindir = sys.argv[1], sys.argv[2]
s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
endpoint = f"http://127.0.0.1:{port}"
moto = subprocess.Popen(
    [os.path.join(bindir, "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
)
passed = 0


def check(cond, what):
    global passed
    if not cond:
        print(f"test-aws: FAILED: {what}", file=sys.stderr)
        print(f"aws: {passed + 1} passed, 1 failed")
        moto.kill()
        sys.exit(1)
    passed += 1
    print(f"test-aws: ok: {what.splitlines()[0]}", file=sys.stderr)


try:
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    kw = dict(
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    sm = boto3.client("secretsmanager", **kw)
    cf = boto3.client("cloudformation", **kw)
    acm = boto3.client("acm", **kw)
    pem = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
         "-subj", "/CN=toren.example.com", "-keyout", "-", "-out", "-"],
        check=True, capture_output=True,
    ).stdout.decode()
    key = pem[pem.index("-----BEGIN PRIVATE KEY-----"):pem.index("-----END PRIVATE KEY-----") + 25]
    crt = pem[pem.index("-----BEGIN CERTIFICATE-----"):pem.index("-----END CERTIFICATE-----") + 25]
    cert = acm.import_certificate(Certificate=crt.encode(), PrivateKey=key.encode())["CertificateArn"]

    keys = {
        "E2B_API_KEY": "e2b_00112233445566778899aabbccddeeff",
        "ANTHROPIC_API_KEY": "sk-ant-secret-one",
        "OPENAI_API_KEY": "sk-openai-secret-two",
        "TOREN_API_TOKEN": "token-secret-three",
    }
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "TOREN_HOME": os.path.join(os.environ.get("TMPDIR", "/tmp"), f"toren-aws-{os.getpid()}"),
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        **keys,
    }
    stack = "toren-test"
    args = [toren, "deploy-aws", "--stack", stack, "--image", "toren:test",
            "--certificate-arn", cert]

    def deploy(*extra, env=env):
        out = subprocess.run(args + list(extra), env=env, capture_output=True, text=True)
        return out.returncode, out.stdout, out.stderr

    def secrets():
        return {s["Name"]: s for s in sm.list_secrets()["SecretList"]}

    code, out, err = deploy("--dry-run")
    check(code == 0 and "would create: stack toren-test" in err, f"--dry-run plans: {err}")
    check(secrets() == {} and cf.list_stacks()["StackSummaries"] == [],
          "--dry-run changed nothing")

    code, out, err = deploy()
    st = cf.describe_stacks(StackName=stack)["Stacks"][0]
    check(code == 0 and st["StackStatus"] == "CREATE_COMPLETE", f"the stack is created: {err}")
    outputs = {o["OutputKey"]: o["OutputValue"] for o in st.get("Outputs", [])}
    check(out.strip() == outputs["ApiUrl"] and out.startswith("https://"),
          f"the API URL is printed: {out!r}")
    names = {f"toren/{stack}/{n}" for n in
             ["database-password", "api-token", "e2b-api-key", "anthropic-api-key", "openai-api-key"]}
    check(set(secrets()) == names, f"the five secrets exist: {sorted(secrets())}")
    value = lambda n: sm.get_secret_value(SecretId=f"toren/{stack}/{n}")["SecretString"]
    check(value("e2b-api-key") == keys["E2B_API_KEY"]
          and value("anthropic-api-key") == keys["ANTHROPIC_API_KEY"]
          and value("openai-api-key") == keys["OPENAI_API_KEY"]
          and value("api-token") == keys["TOREN_API_TOKEN"]
          and len(value("database-password")) == 32,
          "the secrets hold the values given (and a made 32-character database password)")
    shown = json.dumps(st, default=str) + cf.get_template(StackName=stack)["TemplateBody"]
    values = list(keys.values()) + [value("database-password")]
    check(not any(v in shown for v in values),
          "no secret value in the stack's parameters, outputs or template")
    params = {p["ParameterKey"]: p["ParameterValue"] for p in st["Parameters"]}
    check(params["E2bKeySecretArn"] == secrets()[f"toren/{stack}/e2b-api-key"]["ARN"],
          "the stack gets the secrets' ARNs")

    versions = {n: len(sm.list_secret_version_ids(SecretId=n)["Versions"]) for n in names}
    before = cf.describe_stacks(StackName=stack)["Stacks"][0]
    code, out, err = deploy()
    after = cf.describe_stacks(StackName=stack)["Stacks"][0]
    check(code == 0 and "nothing to do" in err and "created" not in err and "updated" not in err,
          f"a second run is a no-op: {err}")
    check(versions == {n: len(sm.list_secret_version_ids(SecretId=n)["Versions"]) for n in names}
          and before.get("LastUpdatedTime") == after.get("LastUpdatedTime")
          and after["StackStatus"] == "CREATE_COMPLETE",
          "no new secret version and no stack update")

    changed = dict(env, ANTHROPIC_API_KEY="sk-ant-secret-rotated")
    code, out, err = deploy(env=changed)
    check(code == 0 and f"updated: secret toren/{stack}/anthropic-api-key" in err
          and value("anthropic-api-key") == "sk-ant-secret-rotated"
          and "unchanged: stack toren-test" in err,
          f"a rotated key updates its secret only: {err}")

    # Deletion, on a stack in a given VPC: moto cannot delete a VPC that a stack made
    # (it does not detach the internet gateway: VPCGatewayAttachment), real AWS can.
    ec2 = boto3.client("ec2", **kw)
    vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    sub = [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.9.{i}.0/24",
                             AvailabilityZone=f"us-east-1{'ab'[i % 2]}")["Subnet"]["SubnetId"]
           for i in range(4)]
    given = "toren-given"
    made = subprocess.run([toren, "deploy-aws", "--stack", given, "--image", "toren:test",
                           "--certificate-arn", cert, "--vpc-id", vpc,
                           "--public-subnets", f"{sub[0]},{sub[1]}",
                           "--private-subnets", f"{sub[2]},{sub[3]}"],
                          env=env, capture_output=True, text=True)
    gst = cf.describe_stacks(StackName=given)["Stacks"][0]
    resources = {r["LogicalResourceId"] for r in
                 cf.list_stack_resources(StackName=given)["StackResourceSummaries"]}
    gparams = {p["ParameterKey"]: p["ParameterValue"] for p in gst["Parameters"]}
    check(made.returncode == 0 and gst["StackStatus"] == "CREATE_COMPLETE"
          and gparams["VpcId"] == vpc and "Vpc" not in resources and "Database" in resources,
          f"a stack in a given VPC makes no VPC: {made.stderr}")
    gnames = {f"toren/{given}/{n}" for n in
              ["database-password", "api-token", "e2b-api-key", "anthropic-api-key", "openai-api-key"]}
    first = subprocess.run([toren, "deploy-aws", "--stack", given, "--delete"],
                           env=env, capture_output=True, text=True)
    left = [s for s in cf.list_stacks()["StackSummaries"]
            if s["StackName"] == given and s["StackStatus"] != "DELETE_COMPLETE"]
    check(first.returncode == 0 and left == [] and gnames <= set(secrets()),
          f"--delete removes the stack and keeps the secrets: {first.stderr}")
    check("deleted the stack toren-given" in first.stderr and "final snapshot" in first.stderr
          and f"kept: secret toren/{given}/e2b-api-key" in first.stderr,
          f"--delete says what it removed and kept: {first.stderr}")
    done = subprocess.run([toren, "deploy-aws", "--stack", given, "--delete"],
                          env=env, capture_output=True, text=True)
    check(done.returncode == 0 and "no stack toren-given to delete" in done.stderr,
          f"--delete again finds nothing to delete: {done.stderr}")
    gone = subprocess.run([toren, "deploy-aws", "--stack", given, "--delete", "--delete-secrets"],
                          env=env, capture_output=True, text=True)
    planned = {s["Name"]: s for s in sm.list_secrets(IncludePlannedDeletion=True)["SecretList"]}
    check(gone.returncode == 0 and "scheduled for deletion" in gone.stderr
          and all(planned[n].get("DeletedDate") for n in gnames)
          and not any(planned[n].get("DeletedDate") for n in names),
          f"--delete-secrets schedules that stack's secrets for deletion: {gone.stderr}")
finally:
    moto.kill()
    moto.wait()
print(f"aws: {passed} passed, 0 failed")

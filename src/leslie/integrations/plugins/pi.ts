// leslie's extension for pi. Written by `leslie hooks install pi`: reinstall, do not edit.
// It decides nothing: each event goes to `leslie hook pi` as one JSON object on stdin, and the JSON object
// leslie prints is applied. It imports nothing from pi at run time.
import { spawn } from "node:child_process";

const LESLIE: string[] = __LESLIE_COMMAND__; // the leslie executable (argv), absolute, as installed
const AGENT = __AGENT__;
const CONTEXT_TIMEOUT_MS = __CONTEXT_TIMEOUT_MS__;
const GUARD_TIMEOUT_MS = __GUARD_TIMEOUT_MS__;

type Answer = { context?: string; block?: string; failed?: string };

// Run `leslie hook pi` with `payload`; resolves to its answer, or to {failed: why}.
function ask(payload: Record<string, unknown>, timeoutMs: number): Promise<Answer> {
  return new Promise((resolve) => {
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn(LESLIE[0], [...LESLIE.slice(1), "hook", AGENT], { stdio: ["pipe", "pipe", "ignore"] });
    } catch (error) {
      resolve({ failed: String(error) });
      return;
    }
    let out = "";
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      resolve({ failed: `leslie did not answer within ${timeoutMs / 1000} s` });
    }, timeoutMs);
    child.stdout?.on("data", (chunk) => { out += chunk; });
    child.on("error", (error) => { clearTimeout(timer); resolve({ failed: String(error) }); });
    child.on("close", (code) => {
      clearTimeout(timer);
      try {
        resolve(out.trim() ? JSON.parse(out) : {});
      } catch {
        resolve({ failed: `leslie answered something that is not JSON (exit ${code})` });
      }
    });
    child.stdin?.on("error", () => {});
    child.stdin?.end(JSON.stringify(payload));
  });
}

// Whether the newest message leslie added is among those the compaction kept verbatim.
function blockKept(compaction: any, branch: any[]): boolean | null {
  const first = compaction?.firstKeptEntryId;
  if (typeof first !== "string" || !Array.isArray(branch)) return null;
  const start = branch.findIndex((entry) => entry?.id === first);
  if (start < 0) return null;
  let last = -1;
  branch.forEach((entry, index) => {
    if (entry?.type === "custom_message" && entry?.customType === "leslie") last = index;
  });
  return last >= start;
}

// The session's manager and folder, seen last. In print mode (`pi -p`) a compaction can end after the
// prompt, once pi has begun to shut down: its ctx is stale then, and the session manager seen before still
// holds the compaction.
let seen: { sessionManager: any; cwd: string } | null = null;

function session(ctx: any): { sessionManager: any; cwd: string } | null {
  try {
    seen = { sessionManager: ctx.sessionManager, cwd: ctx.cwd };
  } catch {
    // a stale ctx: keep what was seen
  }
  return seen;
}

export default function (pi: any) {
  pi.on("before_agent_start", async (event: any, ctx: any) => {
    session(ctx);
    const usage = ctx.getContextUsage?.();
    const answer = await ask({
      event: "before_agent_start", session_id: ctx.sessionManager.getSessionId(), cwd: ctx.cwd,
      prompt: event.prompt,
      usage: usage && typeof usage.tokens === "number" ? { tokens: usage.tokens, contextWindow: usage.contextWindow }
        : null,
    }, CONTEXT_TIMEOUT_MS);
    if (typeof answer.context === "string") {
      return { message: { customType: "leslie", content: answer.context, display: false } };
    }
    return undefined;
  });
  pi.on("session_start", async (_event: any, ctx: any) => {
    session(ctx);
  });
  pi.on("session_compact", async (event: any, ctx: any) => {
    const current = session(ctx);
    if (current === null) return;
    await ask({ event: "session_compact", session_id: current.sessionManager.getSessionId(), cwd: current.cwd,
                context_kept: blockKept(event.compactionEntry, current.sessionManager.getBranch()) },
              CONTEXT_TIMEOUT_MS);
  });
  pi.on("tool_call", async (event: any, ctx: any) => {
    const args = event.input ?? {};
    const answer = await ask({ event: "tool_call", session_id: ctx.sessionManager.getSessionId(), cwd: ctx.cwd,
                               tool: event.toolName, args }, GUARD_TIMEOUT_MS);
    if (typeof answer.block === "string") return { block: true, reason: answer.block };
    if (answer.failed && JSON.stringify(args).includes(".leslie")) {
      return { block: true, reason: `leslie: could not check this call near .leslie/ (${answer.failed}); denied to be safe` };
    }
    return undefined;
  });
}

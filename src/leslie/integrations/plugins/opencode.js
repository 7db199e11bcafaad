// leslie's plugin for opencode (and Kilo Code). Written by `leslie hooks install opencode|kilo`: reinstall, do not edit.
// It decides nothing: each event goes to `leslie hook opencode|kilo` as one JSON object on stdin, and the JSON
// object leslie prints is applied. It imports no SDK (opencode would have to install one first).
import { spawn } from "node:child_process";

const LESLIE = __LESLIE_COMMAND__; // the leslie executable (argv), absolute, as installed
const AGENT = __AGENT__; // "opencode", or "kilo" for Kilo Code (the same plugin API)
const CONTEXT_TIMEOUT_MS = __CONTEXT_TIMEOUT_MS__;
const GUARD_TIMEOUT_MS = __GUARD_TIMEOUT_MS__;

// Run `leslie hook AGENT` with `payload`; resolves to its answer, or to {failed: why}.
function ask(payload, timeoutMs) {
  return new Promise((resolve) => {
    let child;
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
    child.stdout.on("data", (chunk) => { out += chunk; });
    child.on("error", (error) => { clearTimeout(timer); resolve({ failed: String(error) }); });
    child.on("close", (code) => {
      clearTimeout(timer);
      try {
        resolve(out.trim() ? JSON.parse(out) : {});
      } catch {
        resolve({ failed: `leslie answered something that is not JSON (exit ${code})` });
      }
    });
    child.stdin.on("error", () => {});
    child.stdin.end(JSON.stringify(payload));
  });
}

// A part ID as opencode makes them: "prt_", the time in hex, random characters.
function partId() {
  const time = (Date.now() * 0x1000).toString(16).padStart(12, "0").slice(-12);
  const chars = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  let random = "";
  for (let i = 0; i < 14; i += 1) random += chars[Math.floor(Math.random() * chars.length)];
  return `prt_${time}${random}`;
}

export const LesliePlugin = async ({ directory }) => ({
  "chat.message": async (input, output) => {
    const prompt = output.parts.filter((p) => p.type === "text" && !p.synthetic).map((p) => p.text).join("\n");
    const answer = await ask({ event: "chat.message", session_id: input.sessionID, cwd: directory, prompt },
                             CONTEXT_TIMEOUT_MS);
    if (typeof answer.context === "string") {
      output.parts.push({ id: partId(), sessionID: input.sessionID, messageID: output.message.id, type: "text",
                          text: answer.context, synthetic: true });
    }
  },
  event: async ({ event }) => {
    if (event.type === "session.compacted") {
      await ask({ event: "session.compacted", session_id: event.properties.sessionID, cwd: directory },
                CONTEXT_TIMEOUT_MS);
    }
  },
  "tool.execute.before": async (input, output) => {
    const args = output.args ?? {};
    const answer = await ask({ event: "tool.execute.before", session_id: input.sessionID, cwd: directory,
                               tool: input.tool, args }, GUARD_TIMEOUT_MS);
    if (typeof answer.block === "string") throw new Error(answer.block);
    if (answer.failed && JSON.stringify(args).includes(".leslie")) {
      throw new Error(`leslie: could not check this call near .leslie/ (${answer.failed}); denied to be safe`);
    }
  },
});

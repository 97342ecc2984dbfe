// What every agent here shares: the task from the command line, the one tool (add), and how
// an agent ends: its result as one line of JSON on stdout, or the error its client raised
// (exit 1), which is how a replay miss reaches the program.

export const task = process.argv[2] ?? "sum 1 to 3";

// A placeholder where the environment has no key: a replay needs none.
export const key = (name) => process.env[name] || "placeholder-key";

export const addSchema = {
  type: "object",
  properties: { a: { type: "number" }, b: { type: "number" } },
  required: ["a", "b"],
};

export const add = ({ a, b }) => a + b;

export function finish(run) {
  run.then(
    (result) => console.log(JSON.stringify(result)),
    (error) => {
      console.log(JSON.stringify({ error: error?.message ?? String(error) }));
      process.exitCode = 1;
    },
  );
}

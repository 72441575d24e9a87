// check.mjs: what the client tests share: a check prints one line, "ok: DESC" or "FAIL: DESC
// DETAIL", and counts the failures the script exits with.
let failed = 0;

export const check = (desc, cond, detail = "") => {
  console.log(`${cond ? "ok" : "FAIL"}: ${desc}${cond ? "" : " " + detail}`);
  if (!cond) failed++;
};

// A failure inside a client (a refused request, a shape it cannot read) fails that check only.
export const attempt = async (desc, fn) => {
  try {
    await fn();
  } catch (e) {
    check(desc, false, `threw ${e?.constructor?.name}: ${e?.message}`);
  }
};

export const failures = () => failed;

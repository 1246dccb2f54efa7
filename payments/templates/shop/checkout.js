// One checkout attempt = one Idempotency-Key, kept in sessionStorage until its outcome is
// known: every retry (network error, timeout, 5xx, 409 in progress) and a reload reuse it.
(function () {
  "use strict";
  const STORE = "shop.checkout.attempt";
  const ATTEMPT_TIMEOUT_MS = 8000; // one request
  const DEADLINE_MS = 60000; // one checkout attempt, reloads included
  const button = document.getElementById("pay");
  const amount = document.getElementById("amount");
  const outcome = document.getElementById("outcome");
  const csrf = document.querySelector("[name=csrfmiddlewaretoken]").value;

  const load = () => {
    try { return JSON.parse(sessionStorage.getItem(STORE)); } catch (e) { return null; }
  };
  const save = (attempt) => sessionStorage.setItem(STORE, JSON.stringify(attempt));
  const forget = () => sessionStorage.removeItem(STORE);
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  function show(kind, text, link) {
    outcome.hidden = false;
    outcome.className = "outcome " + kind;
    outcome.textContent = text;
    if (link) {
      const a = document.createElement("a");
      a.href = link.href;
      a.textContent = link.text;
      outcome.append(" ", a);
    }
  }

  function busy(on) {
    button.disabled = on;
    amount.disabled = on;
  }

  function retryAfter(response) {
    const value = Number(response.headers.get("Retry-After"));
    return Number.isFinite(value) && value >= 0 ? value * 1000 : null;
  }

  async function pay(attempt) {
    busy(true);
    amount.value = attempt.amount;
    let failures = 0;
    for (;;) {
      attempt.tries = (attempt.tries || 0) + 1;
      save(attempt);
      show("pending", failures || attempt.tries > 1 ? "Confirming your payment…" : "Paying…");
      let response = null;
      let wait = null;
      try {
        response = await fetch(button.dataset.url, {
          method: "POST",
          credentials: "same-origin",
          headers: {
            "Content-Type": "application/json",
            "Idempotency-Key": attempt.key,
            "X-CSRFToken": csrf,
          },
          body: JSON.stringify({ amount: attempt.amount }),
          signal: AbortSignal.timeout(ATTEMPT_TIMEOUT_MS),
        });
      } catch (error) {
        failures += 1; // no answer: it may have been charged; the same key makes a retry safe
      }
      if (response) {
        const body = await response.json().catch(() => ({}));
        if (response.ok) {
          forget();
          button.hidden = true;
          show("paid", `Paid: order #${body.order_id}, ${body.amount}. Balance ${body.balance}.`,
               { href: `/shop/orders/${body.order_id}/`, text: "See the order and the ledger" });
          return;
        }
        const inProgress = response.status === 409 && body.code === "idempotency-request-in-progress";
        if (response.status < 500 && !inProgress) {
          forget(); // a definitive refusal: the next click is a new attempt
          busy(false);
          show("failed", body.detail || `The payment was refused (${response.status}).`);
          return;
        }
        failures += 1;
        wait = retryAfter(response);
      }
      if (Date.now() - attempt.started > DEADLINE_MS) {
        busy(false);
        show("failed", "We could not confirm your payment. It may have gone through: " +
             "reload this page to check. It will not be charged twice.");
        return;
      }
      const backoff = Math.random() * Math.min(8000, 250 * 2 ** (failures - 1));
      await sleep(wait !== null ? wait : backoff);
    }
  }

  button.addEventListener("click", () => {
    if (button.disabled) return;
    const attempt = load() || { key: crypto.randomUUID(), amount: amount.value, started: Date.now() };
    pay(attempt);
  });

  const pending = load();
  if (pending) pay(pending); // a reload while paying: go on with the same key
})();

/*
 * The record protocol of django-idempotency, for the SPIN model checker.
 *
 * N requests carry one idempotency key at once. Each is a client that sends the
 * request and retries on every answer that is not final (409 in progress, 503 store
 * unavailable, a 5xx of the view, a connection lost to a crashed worker), and a server
 * worker that handles each attempt through the store contract
 * (idempotency/stores/base.py). Two modes, chosen when the verifier is generated:
 *
 *   lease mode (default; core/engine.py run_lease): the claim commits first, in progress,
 *     with a lease on the store's clock and a fencing token; a keep-alive renews the lease
 *     while the body runs (core/keepalive.py); the effect is external (never rolled back); the
 *     owner completes or releases the key with its token; an abandoned lease is taken over.
 *   atomic mode (-DATOMIC; core/engine.py run_atomic, DatabaseStore): the claim, the effect (a write
 *     in the same database) and the completion are one transaction; a duplicate's claim
 *     waits on the uncommitted row; a crash, an error or an outage rolls all of it back.
 *
 * Faults, up to FAULTS in a run, at any step: the worker crashes (its keep-alive dies with
 * it; its client sees the connection drop and retries), the view fails (5xx: released),
 * the store is unreachable for a while (every store call fails meanwhile), and (lease
 * mode) a claim's or a completion's reply is lost after the store applied it: the store
 * client resends the same command with the same owner token (RedisStore's resend on a
 * broken connection), and the store may have moved on in between. Stalls need no
 * modelling: SPIN explores every interleaving, so any step of any process may be delayed
 * for as long as the others run, the clock included.
 *
 * Model action -> code (docs/explanation/model.md has the same table):
 *   peek            BaseStore.lookup / peek, before the claim (DatabaseStore.lookup_before_claim)
 *   claim, own      BaseStore.claim: DatabaseStore INSERT ... ON CONFLICT (stores/sql.py),
 *                   RedisStore CLAIM script, CacheStore cache.add + takeover marker;
 *                   own() is a claim that wins, a takeover when the lease had run out
 *   RENEW           BaseStore.extend, called by core/keepalive.py's KeepAlive every third
 *                   of the lease (Watchdog: keepalive.Watchdog and its renewal threads)
 *   complete        BaseStore.complete (fenced UPDATE / COMPLETE script)
 *   release         BaseStore.release (fenced DELETE / RELEASE script), on a view's error
 *                   (core/engine.py give_back)
 *   resend_claim,   RedisStore: a command resent after a lost reply carries the fence drawn
 *   resend_complete before its first send; the scripts answer that fence as the sender's own
 *   Clock           the store's clock: PostgreSQL statement_timestamp(), Redis TIME
 *   Outage          StoreUnavailable from every store call while it lasts (utils/outages.py)
 *   atomic mode     core/engine.py run_atomic: the look-up, then in transaction.atomic()
 *                   DatabaseStore.claim, the view's writes, DatabaseStore.complete;
 *                   commit() is the COMMIT, rollback() its end without one
 *
 * Abstractions (what the model leaves out, and why that loses nothing it checks):
 *   - one key, one fingerprint: mismatches (422) answer at once and change nothing;
 *   - fences: a request's number stands for its token. A request never has two attempts
 *     at once and an ended attempt never uses its token again, as new_fence() draws a
 *     fresh one for every claim;
 *   - time: a record's lease is kept as ticks left (0..L), the store's clock ticks them
 *     down; no TTL: retries come within the record's TTL (an expired record is absent,
 *     and a key may run again after it; tests/stores/test_protocol.py checks expiry);
 *   - no recovery points (a release with one ends the lease instead of deleting);
 *   - no wait=: a duplicate is answered 409 and its client retries, which covers polling.
 *
 * Properties (assertions; CHECK selects them, bit k-1 for Pk: 63 all, 0 none):
 *   P1 the effect happens at most once per key: lease mode counts the body's runs,
 *      atomic mode the committed writes;
 *   P2 no two owners both complete the record;
 *   P3 a stale owner's completion, release and renewal are always refused;
 *   P4 every replay returns the completed response, and only it;
 *   P5 a caller never gets a success for a run whose record was lost: a fresh success
 *      answers with the response the record holds, or will hold, and no other;
 *   P6 a resent command recognises its own owner: a claim resent after its reply was lost
 *      is never answered "in progress" for its own claim, and a completion resent after
 *      its reply was lost is never refused as a stale owner's (lease mode);
 *   live (LTL, weak fairness): every request is eventually answered with the result.
 *
 * Lease mode's assumptions (-DASSUME_RENEWED -DASSUME_COMPLETES); without them P1 and P5
 * have counterexamples by design, the rerun the guarantees table documents:
 *   A1 ASSUME_RENEWED: leases are renewed in time: the lease of a live owner does not run
 *      out before its completion or release (the keep-alive renews it every third while
 *      the body runs; the completion follows the body within what is left);
 *   A2 ASSUME_COMPLETES: an owner that has run its effect reaches its completion: it does
 *      not crash or fail between the two, and the store is reachable for the completion.
 * Atomic mode needs neither: its properties hold under every fault.
 *
 * Store variant -DSTORE_CACHE: CacheStore's completion, a read then a write (its
 * documented weakness): safe under A1, a stale owner's overwrite without it.
 *
 * Mutants (-DMUTANT_<NAME>): one plausible bug each; tests/model/test_spin.py shows SPIN
 * finding a counterexample for each (model/check.py lists which property each breaks).
 */

#ifndef N
#define N 3           /* concurrent requests for the key */
#endif
#ifndef L
#define L 2           /* the lease, in ticks of the store's clock */
#endif
#ifndef FAULTS
#define FAULTS 2      /* crashes, view errors and outages in one run */
#endif
#ifndef CHECK
#define CHECK 63      /* the properties whose assertions are compiled in: bit k-1 for Pk */
#endif

#if (CHECK >> 0) & 1
#define P1(c) assert(c)
#else
#define P1(c) skip
#endif
#if (CHECK >> 1) & 1
#define P2(c) assert(c)
#else
#define P2(c) skip
#endif
#if (CHECK >> 2) & 1
#define P3(c) assert(c)
#else
#define P3(c) skip
#endif
#if (CHECK >> 3) & 1
#define P4(c) assert(c)
#else
#define P4(c) skip
#endif
#if (CHECK >> 4) & 1
#define P5(c) assert(c)
#else
#define P5(c) skip
#endif
#if (CHECK >> 5) & 1
#define P6(c) assert(c)
#else
#define P6(c) skip
#endif

/* record states */
#define ABSENT 0
#define INPROG 1
#define DONE   2

/* what a store call answers */
#define R_NONE    0
#define R_CLAIMED 1   /* ClaimStatus.CLAIMED: the caller owns the key */
#define R_DONE    2   /* ClaimStatus.COMPLETED: replay the stored response */
#define R_BUSY    3   /* ClaimStatus.IN_PROGRESS with a live lease: 409 */
#define R_FREE    4   /* a lookup found the key absent or its lease run out: go claim */
#define R_DOWN    5   /* StoreUnavailable: 503 */
#define R_OK      6   /* complete/release accepted */
#define R_REFUSED 7   /* complete/release refused: a stale fence */

/* -- the store: the committed record ------------------------------------------------ */
byte rec_state = ABSENT;
byte rec_fence;        /* the owner's token: its request number, 0 none */
byte rec_lease;        /* ticks left of the owner's lease (INPROG) */
byte rec_resp;         /* DONE: the response stored, named by the request whose run made it */
bool up = true;        /* the store answers */
byte faults;           /* faults injected so far (at most FAULTS) */

#ifdef ATOMIC
/* atomic mode: the transaction holding the key's uncommitted row (0 none), and what each
   open transaction wrote, invisible to the others until its commit */
byte lock_holder;
bit tx_effect[N+1];
bit tx_done[N+1];
#else
bit holding[N+1];      /* request i holds a claim: from its claim to its completion or release */
bit ka[N+1];           /* request i's keep-alive runs */
byte pending;          /* owners between their effect and their completion (A2) */
#endif

/* -- ghosts: what the properties judge by, never read by the protocol ---------------- */
byte runs;             /* lease mode: the body's effects (external: never rolled back) */
byte committed;        /* atomic mode: the effect's committed writes */
byte completions;      /* completions the store accepted */
byte first_resp;       /* the response of the first accepted completion */
byte cur_owner;        /* the request whose claim is current (a takeover makes the last stale) */
byte promised;         /* the response a caller was answered with as a fresh success */
byte answered;         /* requests answered with the result */

#define FAULT_LEFT (faults < FAULTS)
/* a lost reply is resent by the store client with the same token (RedisStore); CacheStore
   and DatabaseStore do not resend (a lost reply is an error, the client retries afresh) */
#ifdef STORE_CACHE
#define RESEND_LEFT 0
#else
#define RESEND_LEFT FAULT_LEFT
#endif

/* a completion accepted, as every store records it: P2, P5, and the ghosts */
inline accepted_completion(i) {
	P2(completions == 0);
	P5(promised == 0 || promised == i);
	completions++;
	if
	:: first_resp == 0 -> first_resp = i
	:: else -> skip
	fi;
	rec_state = DONE; rec_resp = i; rec_lease = 0; rec_fence = 0; cur_owner = 0
}

/* a caller gets the result: its own run's response (fresh) or a stored one (replay) */
/* the last answer: the record holds the response promised, if one was (P5's end) */
inline last_answer() {
	answered++;
	if
	:: answered == N -> P5(promised == 0 || (rec_state == DONE && rec_resp == promised))
	:: else -> skip
	fi
}
inline answer_fresh(i) {
	/* P5: the record holds this response, or holds nothing yet (atomic mode answers only
	   after the commit, so there it is always held) */
	P5((rec_state != DONE || rec_resp == i) && (promised == 0 || promised == i));
	promised = i;
	last_answer()
}
inline answer_replay(resp) {
	P4(resp != 0 && resp == first_resp);
	last_answer()
}

#ifndef ATOMIC
/* ===================================================================================== */
/*  lease mode                                                                           */
/* ===================================================================================== */

/* peek (lookup before the claim): the committed state; never owns */
inline peek(res, resp) {
	atomic {
		if
		:: !up -> res = R_DOWN
		:: up && rec_state == ABSENT -> res = R_FREE
		:: up && rec_state == DONE -> res = R_DONE; resp = rec_resp
		:: up && rec_state == INPROG && rec_lease > 0 ->
#ifdef MUTANT_REPLAY_IN_PROGRESS
			/* bug: an in-progress record answered as if completed */
			res = R_DONE; resp = rec_resp
#else
			res = R_BUSY
#endif
		:: up && rec_state == INPROG && rec_lease == 0 -> res = R_FREE   /* abandoned */
		fi
	}
}

/* the claim becomes i's: the ghosts follow */
inline own(i) {
	rec_state = INPROG; rec_fence = i; rec_lease = L;
	cur_owner = i; holding[i] = 1; ka[i] = 1
}

/* claim: one atomic step of the store (INSERT ... ON CONFLICT / the CLAIM script) */
inline claim(i, res, resp) {
#ifdef MUTANT_LOOKUP_THEN_INSERT
	/* bug: look the key up, then write the claim in a second, unguarded step */
	atomic {
		if
		:: !up -> res = R_DOWN
		:: up && rec_state == DONE -> res = R_DONE; resp = rec_resp
		:: up && rec_state == INPROG && rec_lease > 0 -> res = R_BUSY
		:: up && (rec_state == ABSENT || (rec_state == INPROG && rec_lease == 0)) -> res = R_FREE
		fi
	};
	if
	:: res == R_FREE ->
		atomic {
			if
			:: !up -> res = R_DOWN
			:: up -> own(i); res = R_CLAIMED
			fi
		}
	:: else -> skip
	fi
#else
	atomic {
		if
		:: !up -> res = R_DOWN
		:: up && rec_state == ABSENT -> own(i); res = R_CLAIMED
		:: up && rec_state == DONE -> res = R_DONE; resp = rec_resp
		:: up && rec_state == INPROG && rec_lease > 0 -> res = R_BUSY
		:: up && rec_state == INPROG && rec_lease == 0 ->
#ifdef MUTANT_NO_TAKEOVER
			/* bug: an abandoned lease is never taken over */
			res = R_BUSY
#else
			own(i); res = R_CLAIMED        /* takeover: the last owner is stale now */
#endif
		fi
	}
#endif
}

#ifdef MUTANT_NO_FENCE_ON_COMPLETE
#define OWNS_FOR_COMPLETE(i) (rec_state == INPROG)       /* bug: the token is not compared */
#else
#define OWNS_FOR_COMPLETE(i) (rec_state == INPROG && rec_fence == i)
#endif
#ifdef MUTANT_RELEASE_ANY_OWNER
#define OWNS_FOR_RELEASE(i) (rec_state == INPROG)        /* bug: frees another owner's claim */
#else
#define OWNS_FOR_RELEASE(i) (rec_state == INPROG && rec_fence == i)
#endif
#ifdef MUTANT_RENEW_IGNORES_FENCE
#define OWNS_FOR_RENEW(i) (rec_state == INPROG)          /* bug: renews whoever owns it */
#else
#define OWNS_FOR_RENEW(i) (rec_state == INPROG && rec_fence == i)
#endif

#ifdef ASSUME_COMPLETES
#define COMPLETED_EFFECT pending--       /* every owner that completes ran its effect first */
#else
#define COMPLETED_EFFECT skip
#endif

#ifdef STORE_CACHE
/* CacheStore: the completion reads the record (cache.get), checks the token, then writes
   the record back completed (cache.set): two steps, and a takeover can come between them
   (its documented weakness). The owner's hold ends with the write. */
inline complete(i, res) {
	atomic {
		if
		:: !up -> res = R_DOWN
		:: up && OWNS_FOR_COMPLETE(i) -> res = R_OK
		:: up && !OWNS_FOR_COMPLETE(i) -> res = R_REFUSED
		fi
	};
	atomic {
		holding[i] = 0;
		if
		:: res == R_OK && !up -> res = R_DOWN
		:: res == R_OK && up -> P3(cur_owner == i); accepted_completion(i)
		:: res != R_OK -> skip
		fi;
		COMPLETED_EFFECT
	}
}
#else
/* complete: fenced; the owner's hold ends with the call, whatever it answers */
inline complete(i, res) {
	atomic {
		holding[i] = 0;
		if
		:: !up -> res = R_DOWN
		:: up && OWNS_FOR_COMPLETE(i) ->
			P3(cur_owner == i);
			accepted_completion(i);
			res = R_OK
		:: up && !OWNS_FOR_COMPLETE(i) -> res = R_REFUSED
		fi;
		COMPLETED_EFFECT
	}
}
#endif

/* release: fenced; a view's error frees the key so the client's retry runs afresh */
inline release(i, res) {
	atomic {
		holding[i] = 0;
		if
		:: !up -> res = R_DOWN          /* the claim ends with its lease */
		:: up && OWNS_FOR_RELEASE(i) ->
			P3(cur_owner == i);
			rec_state = ABSENT; rec_fence = 0; rec_lease = 0; cur_owner = 0;
			res = R_OK
		:: up && !OWNS_FOR_RELEASE(i) -> res = R_REFUSED
		fi
	}
}

/* a claim resent after its reply was lost (the first send applied it): the same token,
   so the store recognises its own claim, if it is still the current one; the store may
   have moved on meanwhile (the lease ran out and another request took over, completed).
   A caller that does not end up owning the key never learned it did: no keep-alive. */
inline resend_claim(i, res, resp) {
	atomic {
		if
		:: !up -> res = R_DOWN
		:: up && rec_state == INPROG && rec_fence == i ->
#ifdef MUTANT_RESEND_FORGETS_OWNER
			/* bug: the resend does not recognise its own token: "in progress" */
			res = R_BUSY
#else
			own(i); res = R_CLAIMED
#endif
		:: up && rec_state == ABSENT -> own(i); res = R_CLAIMED
		:: up && rec_state == DONE -> res = R_DONE; resp = rec_resp
		:: up && rec_state == INPROG && rec_fence != i && rec_lease > 0 -> res = R_BUSY
		:: up && rec_state == INPROG && rec_fence != i && rec_lease == 0 -> own(i); res = R_CLAIMED
		fi;
		P6(!(res == R_BUSY && rec_fence == i));
		if
		:: res != R_CLAIMED -> holding[i] = 0; ka[i] = 0
		:: else -> skip
		fi
	}
}

/* a completion resent after its reply was lost (the first send was accepted): the record
   holds this owner's response, which the resend recognises as its own */
inline resend_complete(i, res) {
	atomic {
		if
		:: !up -> res = R_DOWN
		:: up && rec_state == DONE && rec_resp == i ->
#ifdef MUTANT_RESEND_FORGETS_OWNER
			/* bug: its own completion seen as another's: a false stale-owner alarm */
			res = R_REFUSED
#else
			res = R_OK
#endif
		:: up && !(rec_state == DONE && rec_resp == i) -> res = R_REFUSED
		fi;
		P6(!(res == R_REFUSED && rec_state == DONE && rec_resp == i))
	}
}

/* the store's clock: a tick ages the live lease by one. Under A1 it never runs out the
   lease of an owner still holding the key. */
#ifdef ASSUME_RENEWED
#define TICK_ALLOWED (rec_state == INPROG && rec_lease > 0 && !(rec_lease == 1 && holding[rec_fence]))
#else
#define TICK_ALLOWED (rec_state == INPROG && rec_lease > 0)
#endif
proctype Clock() {
end:	do
	:: atomic { TICK_ALLOWED -> rec_lease-- }
	od
}

/* the keep-alive of every owner (keepalive.Watchdog): renew a lease that has aged; a
   renewal that fails (store unreachable) is retried on the next tick; one refused (the
   token is stale) ends that owner's keep-alive */
#define RENEW(i) \
	:: atomic { ka[i] && !(rec_state == INPROG && rec_fence == i && rec_lease == L) -> \
		if \
		:: !up -> skip \
		:: up && OWNS_FOR_RENEW(i) -> P3(cur_owner == i); rec_lease = L \
		:: up && !OWNS_FOR_RENEW(i) -> ka[i] = 0 \
		fi }

proctype Watchdog() {
end:	do
	RENEW(1)
#if N >= 2
	RENEW(2)
#endif
#if N >= 3
	RENEW(3)
#endif
#if N >= 4
	RENEW(4)
#endif
	od
}

/* a crash or an error may happen here, unless A2 rules it out (between effect and completion) */
#ifdef ASSUME_COMPLETES
#define AFTER_EFFECT_FAULTS 0
#else
#define AFTER_EFFECT_FAULTS 1
#endif

proctype Request(byte i) {
	byte res, resp;
attempt:
	/* DatabaseStore looks the key up first (lookup_before_claim); the others claim at once */
	peek(res, resp);
	if
	:: res == R_DOWN || res == R_BUSY -> res = R_NONE; goto attempt    /* 503 / 409: retry */
	:: res == R_DONE -> goto replay
	:: res == R_FREE -> res = R_NONE
	fi;
	claim(i, res, resp);
	if
	:: RESEND_LEFT && res == R_CLAIMED -> faults++; resend_claim(i, res, resp)   /* reply lost */
	:: true
	fi;
	if
	:: res == R_DOWN || res == R_BUSY -> res = R_NONE; goto attempt
	:: res == R_DONE -> goto replay
	:: res == R_CLAIMED -> res = R_NONE
	fi;
	/* the owner: its keep-alive runs (started with the claim) */
	if
	:: FAULT_LEFT -> faults++; goto crashed            /* crash before the effect */
	:: FAULT_LEFT -> faults++; goto failed             /* the view fails before its effect */
	:: true
	fi;
	/* the effect: external, never rolled back. Under A2 the store is reachable from here
	   to the completion. */
#ifdef ASSUME_COMPLETES
	atomic { up -> runs++; pending++ };
#else
	runs++;
#endif
	P1(runs <= 1);
	if
	:: AFTER_EFFECT_FAULTS && FAULT_LEFT -> faults++; goto crashed   /* after the effect */
	:: AFTER_EFFECT_FAULTS && FAULT_LEFT -> faults++; goto failed    /* error after it */
	:: true
	fi;
	ka[i] = 0;                                  /* the body ended: its keep-alive stops */
	if
	:: AFTER_EFFECT_FAULTS && FAULT_LEFT -> faults++; goto crashed   /* before completing */
	:: true
	fi;
	complete(i, res);
	if
	:: RESEND_LEFT && res == R_OK -> faults++; resend_complete(i, res)   /* reply lost */
	:: true
	fi;
	/* accepted, refused (stale: signalled) or unreachable: the view's answer goes out
	   (core/engine.py record) */
	res = R_NONE;
	if
	:: FAULT_LEFT -> faults++; goto crashed     /* completed, crashed before answering */
	:: true
	fi;
	answer_fresh(i);
	goto end_state;
failed:
	ka[i] = 0;
	release(i, res);                              /* 5xx: released, refused or unreachable */
	res = R_NONE;
	goto attempt;                                 /* the client retries */
crashed:
	/* the worker died: its keep-alive with it; the connection drops and the client retries */
	atomic { ka[i] = 0; holding[i] = 0 };   /* (under A2 no crash comes between effect and completion) */
	goto attempt;
replay:
	answer_replay(resp);
end_state:
	skip
}

#else
/* ===================================================================================== */
/*  atomic mode                                                                          */
/* ===================================================================================== */

/* the transaction of request i ends without a commit: its row, its writes and its lock go */
inline rollback(i) {
	atomic {
		tx_effect[i] = 0; tx_done[i] = 0;
		if
		:: lock_holder == i -> lock_holder = 0; cur_owner = 0
		:: else -> skip
		fi
	}
}

/* the commit: the record and the effect become visible together */
inline commit(i) {
	if
	:: tx_done[i] ->
		P3(cur_owner == i);
		accepted_completion(i)
	:: else -> skip
	fi;
	committed = committed + tx_effect[i];
	P1(committed <= 1);
	tx_effect[i] = 0; tx_done[i] = 0;
	if
	:: lock_holder == i -> lock_holder = 0
	:: else -> skip
	fi
}

proctype Request(byte i) {
	byte res, resp;
attempt:
	/* look the committed record up (peek): a replay needs nothing more */
	atomic {
		if
		:: !up -> res = R_DOWN
		:: up && rec_state == DONE -> res = R_DONE; resp = rec_resp
		:: up && rec_state != DONE -> res = R_FREE
		fi
	};
	if
	:: res == R_DOWN -> res = R_NONE; goto attempt
	:: res == R_DONE -> goto replay
	:: res == R_FREE -> res = R_NONE
	fi;
	/* BEGIN; the claim inside it: INSERT ... ON CONFLICT waits on a concurrent
	   transaction's uncommitted row until that one ends (or LOCK_TIMEOUT: 409) */
#ifdef MUTANT_LOOKUP_THEN_INSERT
	/* bug: no unique index decides: read the committed record, then write */
	atomic {
		if
		:: !up -> res = R_DOWN
		:: up && rec_state == DONE -> res = R_DONE; resp = rec_resp
		:: up && rec_state != DONE -> res = R_FREE
		fi
	};
	if
	:: res == R_FREE -> atomic { lock_holder = i; cur_owner = i; res = R_CLAIMED }
	:: else -> skip
	fi;
#else
	atomic {
		if
		:: !up -> res = R_DOWN
		:: up && lock_holder == 0 && rec_state == DONE -> res = R_DONE; resp = rec_resp
		:: up && lock_holder == 0 && rec_state != DONE ->
			lock_holder = i; cur_owner = i; res = R_CLAIMED
		:: up && lock_holder != 0 -> res = R_BUSY           /* LOCK_TIMEOUT */
		fi
	};
#endif
	if
	:: res == R_DOWN || res == R_BUSY -> res = R_NONE; rollback(i); goto attempt
	:: res == R_DONE -> rollback(i); goto replay
	:: res == R_CLAIMED -> res = R_NONE
	fi;
	if
	:: FAULT_LEFT -> faults++; goto crashed     /* crash before the effect */
	:: FAULT_LEFT -> faults++; goto failed      /* the view fails */
	:: true
	fi;
	/* the effect: a write in the same transaction */
#ifdef MUTANT_EFFECT_OUTSIDE_TRANSACTION
	/* bug: the write commits on its own (another database alias, an inner commit) */
	committed++;
	P1(committed <= 1);
#else
	if
	:: up -> tx_effect[i] = 1
	:: !up -> rollback(i); goto attempt      /* the write fails: rolled back, 503 */
	fi;
#endif
	if
	:: FAULT_LEFT -> faults++; goto crashed     /* crash after the effect */
	:: FAULT_LEFT -> faults++; goto failed      /* the view fails after it: rolled back */
	:: true
	fi;
	/* complete: the fenced UPDATE, in the transaction */
	atomic {
		if
		:: !up -> res = R_DOWN
		:: up -> tx_done[i] = 1; res = R_OK
		fi
	};
	if
	:: res == R_DOWN -> res = R_NONE; rollback(i); goto attempt     /* 503 */
	:: else -> res = R_NONE
	fi;
	if
	:: FAULT_LEFT -> faults++; goto crashed     /* crash before the commit */
	:: true
	fi;
#ifdef MUTANT_ANSWER_BEFORE_COMMIT
	/* bug: the success goes out before the commit */
	answer_fresh(i);
	if
	:: FAULT_LEFT -> faults++; rollback(i); goto end_state   /* the commit then fails */
	:: true
	fi;
	atomic { commit(i) };
	goto end_state;
#else
	/* COMMIT: with the store unreachable its outcome is unknown to the worker: it may have
	   committed or not; either way the worker answers an error and the client retries */
	atomic {
		if
		:: up -> commit(i); res = R_OK
		:: !up -> commit(i); res = R_DOWN
		:: !up -> rollback(i); res = R_DOWN
		fi
	};
	if
	:: res == R_DOWN -> res = R_NONE; goto attempt
	:: else -> res = R_NONE
	fi;
	if
	:: FAULT_LEFT -> faults++; goto attempt     /* committed, crashed before answering */
	:: true
	fi;
	answer_fresh(i);
	goto end_state;
#endif
failed:
	rollback(i);                                  /* 5xx: the transaction rolls back */
	goto attempt;
crashed:
	rollback(i);                                  /* the connection dies: PostgreSQL rolls back */
	goto attempt;
replay:
	answer_replay(resp);
end_state:
	skip
}
#endif

/* store outages: the store stops answering for a while, then answers again. Under A2 an
   outage never starts while an owner is between its effect and its completion. */
#if defined(ASSUME_COMPLETES) && !defined(ATOMIC)
#define OUTAGE_ALLOWED (up && FAULT_LEFT && pending == 0)
#else
#define OUTAGE_ALLOWED (up && FAULT_LEFT)
#endif
proctype Outage() {
end:	do
	:: atomic { OUTAGE_ALLOWED -> up = 0; faults++ }
	:: atomic { !up -> up = 1 }
	od
}

init {
	byte i = 1;
	atomic {
		do
		:: i <= N -> run Request(i); i++
		:: i > N -> break
		od;
		run Outage();
#ifndef ATOMIC
		run Clock();
		run Watchdog();
#endif
	}
}

/* liveness: under weak fairness every request is eventually answered with the result */
ltl live { <> (answered == N) }

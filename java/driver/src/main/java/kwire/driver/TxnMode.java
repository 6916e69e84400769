package kwire.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.producer.KafkaProducer;

/**
 * Mode "txn": a transactional KafkaProducer (KIP-98; transactions v2,
 * KIP-890, on a 4.x cluster).
 *
 * <p>Args: client_id, transactional_id, topic, partition, transactions,
 * records (per transaction), size, abort_every (every Nth transaction is
 * aborted), flush (send the records before ending each transaction, so an
 * aborted one has records and an abort marker in the log; without it the
 * client drops an aborted transaction's unsent records), txn_timeout_ms,
 * and how:
 * <ul>
 *   <li>"commit" (default): the transactions one after the other;</li>
 *   <li>"hang": begin a transaction, write and flush, report {@code txn_open},
 *       ready, and never end it (SIGKILL the driver to leave it hanging until
 *       the coordinator's transaction timeout aborts it; SIGTERM closes the
 *       producer, which aborts);</li>
 *   <li>"zombie": two producers with the same transactional.id: the first
 *       begins and writes, the second initializes (fencing the first), the
 *       first tries to commit (fenced), the second commits. With
 *       {@code zombie_send: false} the first commits at once, without writing
 *       again: its EndTxn itself is what the coordinator refuses;</li>
 *   <li>"timeout": begin, write and flush, then wait (an Admin client's
 *       describeTransactions, every 500 ms) until the coordinator has aborted
 *       the transaction past its transaction.timeout.ms; write again (refused:
 *       reported {@code txn} result "send_refused" with the error), abort
 *       (result "abort", or "error"), and commit a new transaction of the
 *       same records (transactions v2, KIP-890: the coordinator's abort
 *       bumped the epoch, and the client's abort takes it up).</li>
 * </ul>
 * Reports: {@code txn} per transaction end (result commit|abort|fenced|
 * send_refused|error, which producer, records, error), ready after
 * initTransactions.
 */
final class TxnMode {
    private TxnMode() {}

    static Properties props(Task t, JsonNode a, String clientId, String txnId) {
        Properties p = ProducerMode.props(t, a, clientId);
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("transactional.id", txnId);
        if (a.hasNonNull("txn_timeout_ms")) {
            p.put("transaction.timeout.ms", Integer.toString(a.get("txn_timeout_ms").asInt()));
        }
        return p;
    }

    static void run(Task t) throws Exception {
        JsonNode a = t.args;
        String how = Main.str(a, "how", "commit");
        switch (how) {
            case "commit" -> commits(t, a);
            case "hang" -> hang(t, a);
            case "zombie" -> zombie(t, a);
            case "timeout" -> timeout(t, a);
            default -> throw new IllegalArgumentException("unknown how " + how + " (commit, hang, zombie, timeout)");
        }
    }

    static ObjectNode report(Task t, String clientId, String txnId, String result, int records, Exception err) {
        ObjectNode n = t.out.report("txn");
        n.put("client_id", clientId);
        n.put("transactional_id", txnId);
        n.put("result", result);
        n.put("records", records);
        if (err != null) {
            n.put("error", Out.error(err));
        }
        return n;
    }

    private static void commits(Task t, JsonNode a) {
        String clientId = Main.str(a, "client_id", "kwire-java-txn"), txnId = Main.str(a, "transactional_id", clientId);
        String topic = Main.str(a, "topic", "");
        int part = Main.num(a, "partition", -1), per = Main.num(a, "records", 5), size = Main.num(a, "size", 100);
        int n = Main.num(a, "transactions", 1), abortEvery = Main.num(a, "abort_every", 0);
        boolean flush = a.path("flush").asBoolean(false);
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(props(t, a, clientId, txnId))) {
            p.initTransactions();
            t.out.ready();
            for (int i = 1; i <= n && !t.stopped(); i++) {
                p.beginTransaction();
                for (int j = 0; j < per; j++) {
                    p.send(ProducerMode.record(topic, part, j, size));
                }
                if (flush) {
                    p.flush();
                }
                boolean abort = abortEvery > 0 && i % abortEvery == 0;
                try {
                    if (abort) {
                        p.abortTransaction();
                    } else {
                        p.commitTransaction();
                    }
                    t.out.send(report(t, clientId, txnId, abort ? "abort" : "commit", per, null));
                } catch (RuntimeException e) {
                    t.out.send(report(t, clientId, txnId, "error", per, e));
                    throw e;
                }
            }
        }
    }

    private static void hang(Task t, JsonNode a) throws InterruptedException {
        String clientId = Main.str(a, "client_id", "kwire-java-hang"), txnId = Main.str(a, "transactional_id", clientId);
        int per = Main.num(a, "records", 3);
        KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(props(t, a, clientId, txnId));
        try {
            p.initTransactions();
            p.beginTransaction();
            for (int j = 0; j < per; j++) {
                p.send(ProducerMode.record(Main.str(a, "topic", ""), Main.num(a, "partition", -1), j, 100));
            }
            p.flush();
            t.out.send(report(t, clientId, txnId, "open", per, null));
            t.out.ready();
            t.awaitStop();
        } finally {
            p.close(); // graceful close aborts the open transaction
        }
    }

    private static void zombie(Task t, JsonNode a) {
        String clientId = Main.str(a, "client_id", "kwire-java-zombie"), txnId = Main.str(a, "transactional_id", clientId);
        String topic = Main.str(a, "topic", "");
        int part = Main.num(a, "partition", -1), per = Main.num(a, "records", 3);
        String zid = clientId + "-zombie", sid = clientId + "-successor";
        try (KafkaProducer<byte[], byte[]> z = new KafkaProducer<>(props(t, a, zid, txnId));
             KafkaProducer<byte[], byte[]> s = new KafkaProducer<>(props(t, a, sid, txnId))) {
            z.initTransactions();
            t.out.ready();
            z.beginTransaction();
            for (int j = 0; j < per; j++) {
                z.send(ProducerMode.record(topic, part, j, 100));
            }
            z.flush();
            s.initTransactions(); // bumps the epoch: z is a zombie now
            boolean send = a.path("zombie_send").asBoolean(true);
            int zn = send ? per + 1 : per;
            try {
                if (send) {
                    z.send(ProducerMode.record(topic, part, per, 100));
                }
                z.commitTransaction();
                t.out.send(report(t, zid, txnId, "commit", zn, null));
            } catch (RuntimeException e) {
                t.out.send(report(t, zid, txnId, "fenced", zn, e));
            }
            s.beginTransaction();
            for (int j = 0; j < per; j++) {
                s.send(ProducerMode.record(topic, part, j, 100));
            }
            s.commitTransaction();
            t.out.send(report(t, sid, txnId, "commit", per, null));
        }
    }

    private static void timeout(Task t, JsonNode a) throws Exception {
        String clientId = Main.str(a, "client_id", "kwire-java-timeout"), txnId = Main.str(a, "transactional_id", clientId);
        String topic = Main.str(a, "topic", "");
        int part = Main.num(a, "partition", -1), per = Main.num(a, "records", 3), size = Main.num(a, "size", 100);
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(props(t, a, clientId, txnId));
             Admin admin = Admin.create(t.props(clientId + "-admin"))) {
            p.initTransactions();
            t.out.ready();
            p.beginTransaction();
            for (int j = 0; j < per; j++) {
                p.send(ProducerMode.record(topic, part, j, size));
            }
            p.flush();
            t.out.send(report(t, clientId, txnId, "open", per, null));
            awaitAborted(t, admin, txnId);
            try {
                p.send(ProducerMode.record(topic, part, per, size)).get();
                t.out.send(report(t, clientId, txnId, "sent", 1, null));
            } catch (ExecutionException | RuntimeException e) {
                t.out.send(report(t, clientId, txnId, "send_refused", 1, e));
            }
            try {
                p.abortTransaction();
                t.out.send(report(t, clientId, txnId, "abort", per + 1, null));
            } catch (RuntimeException e) {
                t.out.send(report(t, clientId, txnId, "error", per + 1, e));
                throw e;
            }
            p.beginTransaction();
            for (int j = 0; j < per; j++) {
                p.send(ProducerMode.record(topic, part, j, size));
            }
            p.commitTransaction();
            t.out.send(report(t, clientId, txnId, "commit", per, null));
        }
    }

    /** awaitAborted waits until txnId's coordinator no longer has its transaction ongoing. */
    private static void awaitAborted(Task t, Admin admin, String txnId) throws Exception {
        while (!t.stopped()) {
            TransactionState s = admin.describeTransactions(List.of(txnId)).description(txnId).get().state();
            if (s != TransactionState.ONGOING) {
                t.out.note("transaction of " + txnId + " is " + s + " by its coordinator");
                return;
            }
            t.await(Duration.ofMillis(500));
        }
    }
}

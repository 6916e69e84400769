package kwire.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;

/**
 * Mode "ctp": consume-transform-produce, exactly once (KIP-98, KIP-447): a
 * read_committed group member reads topics, and for every poll a
 * transactional producer writes the records (values reversed) to output and
 * commits the consumed offsets inside the transaction
 * (sendOffsetsToTransaction with consumer.groupMetadata(), so the group
 * coordinator fences a zombie by generation).
 *
 * <p>Args: the consumer's (mode "consumer": group, topics, assignor,
 * group_protocol...; commit is the transaction's) plus output,
 * transactional_id, records (stop after this many). Reports the member's
 * (owned, revoked, consumed) and per transaction {@code txn} with the
 * offsets it committed ({@code commit} how=txn). Ready: once owning
 * partitions.
 */
final class CtpMode {
    private CtpMode() {}

    static void run(Task t) throws Exception {
        JsonNode a = t.args;
        Member m = new Member(t.out, Main.str(a, "group", ""), Main.str(a, "client_id", "kwire-java-ctp"),
                Main.str(a, "instance_id", ""));
        String output = Main.str(a, "output", ""), txnId = Main.str(a, "transactional_id", m.clientId);
        long limit = Main.num(a, "records", 0);
        Properties cp = ConsumerMode.props(t, m, a);
        cp.put("enable.auto.commit", "false");
        cp.put("isolation.level", "read_committed");
        Probe.member = m;
        m.onAssigned = () -> {
            if (!m.owned().isEmpty()) {
                t.out.ready();
            }
        };
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp);
             KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(TxnMode.props(t, a, m.clientId + "-producer", txnId))) {
            m.consumer.set(c);
            t.onStop(c::wakeup);
            p.initTransactions();
            c.subscribe(ConsumerMode.topics(a), m);
            long n = 0;
            while (!t.stopped() && (limit == 0 || n < limit)) {
                ConsumerRecords<byte[], byte[]> rs;
                try {
                    rs = c.poll(Duration.ofMillis(200));
                } catch (WakeupException e) {
                    break;
                }
                if (rs.isEmpty()) {
                    continue;
                }
                m.consumed(rs);
                Map<TopicPartition, OffsetAndMetadata> o = new HashMap<>();
                p.beginTransaction();
                for (ConsumerRecord<byte[], byte[]> r : rs) {
                    p.send(new ProducerRecord<>(output, r.key(), reverse(r.value())));
                    o.putAll(Member.next(r));
                }
                try {
                    p.sendOffsetsToTransaction(o, c.groupMetadata());
                    p.commitTransaction();
                    m.commit("txn", o, null);
                    n += rs.count();
                } catch (RuntimeException e) {
                    m.commit("txn", o, e);
                    p.abortTransaction();
                    for (TopicPartition tp : rs.partitions()) { // read it again
                        List<ConsumerRecord<byte[], byte[]>> l = rs.records(tp);
                        c.seek(tp, l.get(0).offset());
                    }
                }
            }
            ObjectNode r = m.stamp(m.report("closing"));
            r.put("records", n);
            t.out.send(r);
        }
    }

    private static byte[] reverse(byte[] v) {
        byte[] out = new byte[v == null ? 0 : v.length];
        for (int i = 0; i < out.length; i++) {
            out[i] = v[v.length - 1 - i];
        }
        return out;
    }
}

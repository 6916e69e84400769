package kwire.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Mode "share": one KafkaShareConsumer (KIP-932) in a share group, with
 * explicit acknowledgement.
 *
 * <p>Args: client_id, group, topics, ack (accept|release|reject: what every
 * record gets; default accept), poison (a record value: such records are
 * released every time, so they come back until the broker's delivery limit
 * archives them), poison_ack (release|reject; default release), records (stop
 * after this many acknowledged as accept), hold_ms (after the first records,
 * hold them unacknowledged this long: a member SIGKILLed meanwhile dies holding
 * acquired records).
 *
 * <p>Reports: {@code share_acks} per poll and partition (counts by type, first
 * and last offset, the highest delivery count), {@code share_commit} per
 * partition from commitSync (the broker's verdict), {@code poison} per poison
 * delivery. Ready: after the first poll that returned records.
 */
final class ShareMode {
    private ShareMode() {}

    static void run(Task t) throws Exception {
        JsonNode a = t.args;
        String group = Main.str(a, "group", ""), clientId = Main.str(a, "client_id", "kwire-java-share");
        AcknowledgeType ack = AcknowledgeType.valueOf(Main.str(a, "ack", "accept").toUpperCase());
        String poison = Main.str(a, "poison", null);
        AcknowledgeType poisonAck = AcknowledgeType.valueOf(Main.str(a, "poison_ack", "release").toUpperCase());
        long limit = Main.num(a, "records", 0), holdMs = Main.num(a, "hold_ms", 0);
        Properties p = t.props(clientId);
        p.put("group.id", group);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("share.acknowledgement.mode", "explicit");
        long accepted = 0;
        boolean held = false;
        try (KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(p)) {
            t.onStop(c::wakeup);
            c.subscribe(ConsumerMode.topics(a));
            while (!t.stopped() && (limit == 0 || accepted < limit)) {
                ConsumerRecords<byte[], byte[]> rs;
                try {
                    rs = c.poll(Duration.ofMillis(200));
                } catch (WakeupException e) {
                    break;
                }
                if (rs.isEmpty()) {
                    continue;
                }
                t.out.ready();
                if (holdMs > 0 && !held) {
                    held = true;
                    ObjectNode n = report(t, "share_hold", group, clientId);
                    n.put("records", rs.count());
                    t.out.send(n);
                    if (t.await(Duration.ofMillis(holdMs))) {
                        break;
                    }
                }
                Map<String, Tally> tallies = new TreeMap<>();
                for (ConsumerRecord<byte[], byte[]> r : rs) {
                    boolean bad = poison != null && poison.equals(new String(r.value(), StandardCharsets.UTF_8));
                    AcknowledgeType how = bad ? poisonAck : ack;
                    c.acknowledge(r, how);
                    tallies.computeIfAbsent(r.topic() + "\u0000" + r.partition(), k -> new Tally(r)).add(r, how);
                    if (bad) {
                        ObjectNode n = report(t, "poison", group, clientId);
                        n.put("topic", r.topic());
                        n.put("partition", r.partition());
                        n.put("offset", r.offset());
                        n.put("delivery_count", r.deliveryCount().orElse((short) -1));
                        n.put("ack", how.toString().toLowerCase());
                        t.out.send(n);
                    } else if (how == AcknowledgeType.ACCEPT) {
                        accepted++;
                    }
                }
                for (Tally y : tallies.values()) {
                    ObjectNode n = report(t, "share_acks", group, clientId);
                    y.put(n);
                    t.out.send(n);
                }
                Map<TopicIdPartition, java.util.Optional<org.apache.kafka.common.KafkaException>> res;
                try {
                    res = c.commitSync();
                } catch (WakeupException e) {
                    break;
                }
                res.forEach((tip, err) -> {
                    ObjectNode n = report(t, "share_commit", group, clientId);
                    n.put("topic", tip.topic());
                    n.put("partition", tip.partition());
                    n.put("ok", err.isEmpty());
                    err.ifPresent(e -> n.put("error", Out.error(e)));
                    t.out.send(n);
                });
            }
            ObjectNode n = report(t, "closing", group, clientId);
            n.put("records", accepted);
            t.out.send(n);
        }
    }

    static ObjectNode report(Task t, String kind, String group, String clientId) {
        ObjectNode n = t.out.report(kind);
        n.put("share_group", group); // not "group": the groups truth is of consumer groups
        n.put("client_id", clientId);
        return n;
    }

    /** Tally counts one poll's acknowledgements of one partition. */
    private static final class Tally {
        final String topic;
        final int partition;
        long first = Long.MAX_VALUE, last = -1;
        int maxDelivery;
        final Map<String, Integer> acks = new TreeMap<>();

        Tally(ConsumerRecord<?, ?> r) {
            topic = r.topic();
            partition = r.partition();
        }

        void add(ConsumerRecord<?, ?> r, AcknowledgeType how) {
            first = Math.min(first, r.offset());
            last = Math.max(last, r.offset());
            maxDelivery = Math.max(maxDelivery, r.deliveryCount().orElse((short) 0));
            acks.merge(how.toString().toLowerCase(), 1, Integer::sum);
        }

        void put(ObjectNode n) {
            n.put("topic", topic);
            n.put("partition", partition);
            n.put("first_offset", first);
            n.put("last_offset", last);
            n.put("max_delivery_count", maxDelivery);
            ObjectNode a = n.putObject("acks");
            acks.forEach(a::put);
            n.put("records", acks.values().stream().mapToInt(Integer::intValue).sum());
        }
    }
}

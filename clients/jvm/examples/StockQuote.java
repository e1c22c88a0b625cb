// Signs and sends GET /api/1/stockquote/AAPL through java.net.http, and prints the JSON answer.
// From the repository root, after clients/jvm/build.sh:
//   java -cp "$(cat .build/jvm/classpath)" clients/jvm/examples/StockQuote.java [http://127.0.0.1:8080]
// PORTICO_KEY_ID and PORTICO_SECRET_FILE override the demo key.
import dev.portico.signer.ClientIdentity;
import dev.portico.signer.RequestSigner;
import dev.portico.signer.jdkhttp.HttpClientSigning;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Paths;

public class StockQuote {
    public static void main(String[] args) throws Exception {
        String gateway = args.length > 0 ? args[0] : "http://127.0.0.1:8080";
        String secret = RequestSigner.readSecretFile(
                Paths.get(System.getenv().getOrDefault("PORTICO_SECRET_FILE", "policies/secrets/demo-app.secret")));
        RequestSigner signer = RequestSigner.builder(System.getenv().getOrDefault("PORTICO_KEY_ID", "demo-app"), secret)
                .identity(new ClientIdentity("1.0.0", "jvm"))
                .build();
        HttpRequest request = HttpClientSigning.newRequest(signer, "GET", URI.create(gateway + "/api/1/stockquote/AAPL"), null, null);
        HttpResponse<String> response = HttpClient.newHttpClient().send(request, HttpResponse.BodyHandlers.ofString());
        System.out.println(response.body());
        if (response.statusCode() != 200) System.exit(1);
    }
}
